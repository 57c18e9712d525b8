/**
 * What the encryption tests share: operator keys, a worker on a test engine
 * driven by hand (a fake clock, a restore point at every step), a logger
 * that keeps every event, and a look at what the bucket holds.
 */
import {
  type AgeIdentity,
  type AgeRecipient,
  generateIdentity,
  parseIdentity,
  parseRecipient,
} from '@x/age-envelope';
import { FakeClock } from '@x/lease';
import {
  type Manifest,
  parseLatest,
  parseManifest,
  parseSegmentKey,
  parseSnapshotKey,
} from '@x/manifest';
import { type CallOptions, MemoryStore, type ObjectVersion, type PutOptions } from '@x/store';
import { BackupWorker, type BackupWorkerOptions } from '../../src/index.ts';
import type { TestSource } from './commit-log-engine.ts';

export const PREFIX = 'p';

/** An operator's key pair, as `age-keygen` would make it. */
export interface OperatorKey {
  readonly recipient: AgeRecipient;
  readonly identity: AgeIdentity;
  /** The secret key's text, to look for where it must never be. */
  readonly secretText: string;
}

export function operatorKey(): OperatorKey {
  const generated = generateIdentity();
  return {
    recipient: parseRecipient(generated.recipient),
    identity: parseIdentity(generated.identity, 'operator.key'),
    secretText: generated.identity,
  };
}

export interface LoggedEvent {
  readonly level: 'debug' | 'info' | 'warn' | 'error';
  readonly event: string;
  readonly fields: Record<string, unknown>;
}

/** A memory store that counts GETs and can lose the answer of one PUT (stored, then an error). */
export class TestStore extends MemoryStore {
  readonly gets: string[] = [];
  /** The next PUT of a key this matches is stored, and its caller told it failed. */
  loseAnswerOf: ((key: string) => boolean) | null = null;

  override async get(key: string, options?: CallOptions) {
    this.gets.push(key);
    return super.get(key, options);
  }

  override async put(
    key: string,
    body: Uint8Array,
    options?: PutOptions & CallOptions,
  ): Promise<{ version: ObjectVersion }> {
    const result = await super.put(key, body, options);
    if (this.loseAnswerOf?.(key)) {
      this.loseAnswerOf = null;
      throw new Error(`the answer to PUT ${key} was lost`);
    }
    return result;
  }
}

export function recordingLogger(events: LoggedEvent[]): NonNullable<BackupWorkerOptions['logger']> {
  const at =
    (level: LoggedEvent['level']) =>
    (event: string, fields: object = {}): void => {
      events.push({ level, event, fields: fields as Record<string, unknown> });
    };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** A worker on `source`, stepped by hand; no compaction unless `options` say so. */
export function testWorker(
  store: MemoryStore,
  source: TestSource,
  events: LoggedEvent[],
  options: Partial<BackupWorkerOptions> = {},
): BackupWorker {
  return new BackupWorker({
    store,
    prefix: PREFIX,
    source,
    clock: new FakeClock(),
    manifestIntervalMs: 0,
    compactionLevels: [],
    logger: recordingLogger(events),
    ...options,
  });
}

/** Every object under the prefix, by key. */
export async function bucketObjects(store: MemoryStore): Promise<Map<string, Uint8Array>> {
  const objects = new Map<string, Uint8Array>();
  for (const { key } of (await store.list(`${PREFIX}/`)).objects) {
    const found = await store.get(key);
    if (found !== null) objects.set(key, found.body);
  }
  return objects;
}

/** Keys of the snapshots, fine segments and compacted objects: everything that holds database content. */
export function contentKeys(objects: Map<string, Uint8Array>): string[] {
  return [...objects.keys()].filter(
    (key) =>
      parseSnapshotKey(PREFIX, key) !== undefined || parseSegmentKey(PREFIX, key) !== undefined,
  );
}

/** The restore point LATEST names. */
export async function latestManifest(store: MemoryStore): Promise<Manifest> {
  const latest = await store.get(`${PREFIX}/LATEST`);
  if (latest === null) throw new Error('no LATEST');
  const key = parseLatest(latest.body, { prefix: PREFIX });
  const manifest = await store.get(key);
  if (manifest === null) throw new Error(`no ${key}`);
  return parseManifest(manifest.body, { prefix: PREFIX });
}

/** What a generation's objects must never reveal: no secret key in any event or error. */
export function secretsIn(texts: readonly string[], keys: readonly OperatorKey[]): string[] {
  return texts.filter(
    (text) => text.includes('AGE-SECRET-KEY') || keys.some((key) => text.includes(key.secretText)),
  );
}
