/**
 * The operations every hostile case is run through, each on its own fresh
 * copy of the planted bucket, with the outcome reduced to what the table
 * asserts: did it refuse or pass, the text it said, and what it read.
 */

import { Writable } from 'node:stream';
import { BucketLease, FakeClock, LeaseWatch, newInstanceId } from '@x/lease';
import { restoreFramedStore } from '@x/source-framed';
import type { CallOptions, GetResult, GetStreamResult, ObjectStore } from '@x/store';
import { ForwardingStore } from '@x/store/adapter';
import { main } from '../../src/main.ts';
import { appendCommits, BASELINE_COMMITS, type CasePaths, newWorker, PREFIX } from './bucket.ts';

export const OPERATIONS = [
  'resume',
  'retention',
  'restore()',
  'backupd restore',
  'backupd ls',
  'backupd verify',
  'backupd verify --deep',
  'backupd lease',
  'lease acquire',
] as const;
export type Operation = (typeof OPERATIONS)[number];

/** Operations that may write to the store (under the prefix). */
export const WRITING_OPERATIONS: ReadonlySet<Operation> = new Set([
  'resume',
  'retention',
  'lease acquire',
]);
/** Operations that may write into the restore target. */
export const RESTORING_OPERATIONS: ReadonlySet<Operation> = new Set([
  'restore()',
  'backupd restore',
]);

export interface Outcome {
  /** `refused`: threw, or exited non-zero; `passed`: resolved, or exited 0. */
  readonly result: 'refused' | 'passed';
  /** The error's message, or everything the command printed. */
  readonly text: string;
  /** The thrown value's class name (library operations). */
  readonly errorName?: string;
  readonly exitCode?: number;
}

/**
 * Counts the body bytes each key delivered to the caller (get, and getStream
 * as consumed). Every other method (`list` and `listPages` included: a
 * listing delivers no body) is `ForwardingStore`'s, passed on untouched.
 */
export class MeteredStore extends ForwardingStore {
  readonly bytesRead = new Map<string, number>();

  #count(key: string, bytes: number): void {
    this.bytesRead.set(key, (this.bytesRead.get(key) ?? 0) + bytes);
  }

  override async get(key: string, options?: CallOptions): Promise<GetResult | null> {
    const result = await super.get(key, options);
    if (result !== null) this.#count(key, result.body.byteLength);
    return result;
  }

  override async getStream(key: string, options?: CallOptions): Promise<GetStreamResult | null> {
    const result = await super.getStream(key, options);
    if (result === null) return null;
    const count = (bytes: number) => this.#count(key, bytes);
    const inner = result.body;
    const body: AsyncIterable<Uint8Array> = {
      [Symbol.asyncIterator]() {
        const iterator = inner[Symbol.asyncIterator]();
        return {
          async next() {
            const step = await iterator.next();
            if (!step.done) count(step.value.byteLength);
            return step;
          },
          async return(value?: unknown) {
            await iterator.return?.();
            return { done: true as const, value: value as Uint8Array };
          },
        };
      },
    };
    return { ...result, body };
  }
}

function refusedBy(error: unknown): Outcome {
  return {
    result: 'refused',
    text: error instanceof Error ? error.message : String(error),
    errorName: error instanceof Error ? error.constructor.name : typeof error,
  };
}

class Collector extends Writable {
  text = '';
  override _write(chunk: Buffer | string, _encoding: BufferEncoding, done: () => void): void {
    this.text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    done();
  }
}

async function cli(args: readonly string[], paths: CasePaths): Promise<Outcome> {
  const stdout = new Collector();
  const stderr = new Collector();
  const exitCode = await main(args, {
    stdout,
    stderr,
    // No BACKUPD_DEBUG: a stack trace must never be what an operator sees.
    env: { PATH: process.env.PATH },
    cwd: paths.root,
  });
  return {
    result: exitCode === 0 ? 'passed' : 'refused',
    text: `${stdout.text}${stderr.text}`,
    exitCode,
  };
}

/**
 * What an operation needs before the "before" snapshot: for the workers, one
 * more commit in the source, so the step has something to back up and a new
 * restore point (and, with retain 1, retention) is due.
 */
export async function prepareOperation(operation: Operation, paths: CasePaths): Promise<void> {
  if (operation === 'resume' || operation === 'retention')
    await appendCommits(paths.source, BASELINE_COMMITS + 1, BASELINE_COMMITS + 1);
}

/**
 * Runs `operation` against the case's store and directories. Library
 * operations get `store` (metered); the commands open the `file://` URL
 * themselves, as an operator's would.
 */
export async function runOperation(
  operation: Operation,
  store: ObjectStore,
  paths: CasePaths,
): Promise<Outcome> {
  switch (operation) {
    case 'resume':
    case 'retention': {
      const worker = newWorker(store, paths.source, operation === 'retention' ? 1 : 0);
      try {
        await worker.runOnce();
        return { result: 'passed', text: `backed up commit ${BASELINE_COMMITS + 1}` };
      } catch (error) {
        return refusedBy(error);
      }
    }
    case 'restore()':
      try {
        const result = await restoreFramedStore(store, PREFIX, paths.target);
        return { result: 'passed', text: `restored commit ${result.commitSeq}` };
      } catch (error) {
        return refusedBy(error);
      }
    case 'backupd restore':
      return cli(['restore', '--type', 'framed', paths.storeUrl, paths.target], paths);
    case 'backupd ls':
      return cli(['ls', paths.storeUrl], paths);
    case 'backupd verify':
      return cli(['verify', paths.storeUrl], paths);
    case 'backupd verify --deep':
      return cli(['verify', '--deep', paths.storeUrl], paths);
    case 'backupd lease':
      return cli(['lease', paths.storeUrl], paths);
    case 'lease acquire':
      try {
        const lease = await BucketLease.acquireAs(store, {
          prefix: PREFIX,
          instanceId: newInstanceId(),
          clock: new FakeClock({ wallMs: Date.now() }),
          watch: new LeaseWatch(),
          logger: { info() {}, warn() {} },
        });
        return { result: 'passed', text: `acquired generation ${lease.generation}` };
      } catch (error) {
        return refusedBy(error);
      }
  }
}
