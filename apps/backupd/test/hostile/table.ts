/**
 * The machinery behind the hostile-bucket table: one fresh copy of the
 * baseline per row and operation, the planting, the operation, and every
 * check that holds whatever the row is (no crash, no stack trace, no write
 * outside the prefix or the target, no deletion of what the operation did
 * not write, reads of hostile objects capped).
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import { FsStore, type ObjectStore } from '@x/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  buildBaseline,
  type CasePaths,
  casePaths,
  copyCase,
  OUTSIDE_KEY,
  PREFIX,
  storeChanges,
  storeContents,
  treeChanges,
  treeSnapshot,
} from './bucket.ts';
import {
  MeteredStore,
  OPERATIONS,
  type Operation,
  type Outcome,
  prepareOperation,
  RESTORING_OPERATIONS,
  runOperation,
  WRITING_OPERATIONS,
} from './operations.ts';
import type { Planter } from './plant.ts';

/** What an operation must do with a row: refuse or pass, saying every one of `says`. */
export interface Expectation {
  readonly result: 'refused' | 'passed';
  readonly says: readonly string[];
}

/** Refuses (throws, or exits non-zero) with a message containing each fragment. */
export const refuses = (...says: string[]): Expectation => ({ result: 'refused', says });
/** Passes (resolves, or exits 0), its output containing each fragment. */
export const passes = (...says: string[]): Expectation => ({ result: 'passed', says });

export interface Expectations {
  readonly resume: Expectation;
  /** Default: as `resume`. */
  readonly retention?: Expectation;
  /** `restore()`; also `backupd restore` unless `cliRestore` is given. */
  readonly restore: Expectation;
  readonly cliRestore?: Expectation;
  readonly ls: Expectation;
  /** `backupd verify`; also `--deep` unless `deep` is given. */
  readonly verify: Expectation;
  readonly deep?: Expectation;
  readonly lease: Expectation;
  readonly acquire: Expectation;
}

export interface Row {
  readonly name: string;
  readonly plant: Planter;
  readonly expect: Expectations;
  /** Keys no operation may delete or change, besides the planted ones and those outside the prefix. */
  readonly protect?: (paths: CasePaths) => readonly string[];
  /**
   * Planted keys retention may delete: objects under a generation it
   * retires, whose prefix it clears of segments no kept restore point names
   * (a crash's leftovers look the same).
   */
  readonly retentionMayDelete?: readonly string[];
  /** The most body bytes a library operation may read of `key`. */
  readonly readCap?: { readonly key: string; readonly bytes: number };
}

export function expectationFor(row: Row, operation: Operation): Expectation {
  const e = row.expect;
  switch (operation) {
    case 'resume':
      return e.resume;
    case 'retention':
      return e.retention ?? e.resume;
    case 'restore()':
      return e.restore;
    case 'backupd restore':
      return e.cliRestore ?? e.restore;
    case 'backupd ls':
      return e.ls;
    case 'backupd verify':
      return e.verify;
    case 'backupd verify --deep':
      return e.deep ?? e.verify;
    case 'backupd lease':
      return e.lease;
    case 'lease acquire':
      return e.acquire;
  }
}

/** A line of a stack trace, as Node prints them. */
const STACK_LINE = /^\s+at .+(:\d+:\d+\)?|<anonymous>\)?)$/m;

export class HostileTable {
  readonly #build: (root: string) => Promise<void>;
  #baseline: string | null = null;
  #scratch: string | null = null;
  #cases = 0;
  readonly unhandled: unknown[] = [];
  readonly #onUnhandled = (reason: unknown): void => {
    this.unhandled.push(reason);
  };

  /** `build` makes the baseline bucket every case starts from (default: {@link buildBaseline}'s). */
  constructor(build: (root: string) => Promise<void> = buildBaseline) {
    this.#build = build;
  }

  async setUp(): Promise<void> {
    this.#scratch = await mkdtemp(join(tmpdir(), 'backupd-hostile-'));
    this.#baseline = join(this.#scratch, 'baseline');
    await this.#build(this.#baseline);
    process.on('unhandledRejection', this.#onUnhandled);
  }

  async tearDown(): Promise<void> {
    process.off('unhandledRejection', this.#onUnhandled);
    if (this.#scratch) await rm(this.#scratch, { recursive: true, force: true });
  }

  /** Plants the row in a fresh copy, runs the operation, checks everything; returns the outcome. */
  async run(
    row: Row,
    operation: Operation,
    /** Stands in for the real operation (meta-tests: a broken implementation must be caught). */
    perform: (store: ObjectStore, paths: CasePaths) => Promise<Outcome> = (store, paths) =>
      runOperation(operation, store, paths),
  ): Promise<Outcome> {
    this.#cases += 1;
    const root = join(this.#scratch!, `case-${this.#cases}`);
    await copyCase(this.#baseline!, root);
    const paths = casePaths(root);
    try {
      const fsStore = new FsStore({ root: paths.storeRoot, fsync: false });
      const baseline = await storeContents(fsStore);
      await row.plant(fsStore, paths);
      const before = await storeContents(fsStore);
      const planted = storeChanges(baseline, before);
      const plantedKeys = [...planted.created, ...planted.modified];
      await prepareOperation(operation, paths);
      const treeBefore = await treeSnapshot(root);
      const metered = new MeteredStore(fsStore);

      const outcome = await perform(metered, paths);
      // Let any stray promise settle before looking for unhandled rejections.
      await new Promise((resolve) => setImmediate(resolve));

      const expected = expectationFor(row, operation);
      const what = `${operation} on "${row.name}"`;
      expect(
        { result: outcome.result, text: outcome.text },
        `${what}: expected it to ${expected.result === 'refused' ? 'refuse' : 'pass'} saying ${JSON.stringify(expected.says)}`,
      ).toEqual({
        result: expected.result,
        text: expect.toSatisfy((text: string) =>
          expected.says.every((fragment) => text.includes(fragment)),
        ),
      });
      // Never a crash: no stack trace printed, no generic runtime error as the answer.
      expect(outcome.text, `${what}: printed a stack trace`).not.toMatch(STACK_LINE);
      expect(outcome.errorName ?? '', `${what}: failed with a runtime error`).not.toMatch(
        /^(TypeError|RangeError|SyntaxError|ReferenceError)$/,
      );
      expect(this.unhandled, `${what}: left an unhandled rejection`).toEqual([]);

      // The file system: nothing outside what this operation may write.
      const treeAfter = await treeSnapshot(root);
      const allowed = (path: string): boolean =>
        (WRITING_OPERATIONS.has(operation) && path.startsWith(`store${sep}${PREFIX}${sep}`)) ||
        (RESTORING_OPERATIONS.has(operation) &&
          (path === `restore${sep}target` || path.startsWith(`restore${sep}target${sep}`)));
      expect(
        treeChanges(treeBefore, treeAfter).filter((path) => !allowed(path)),
        `${what}: changed files it may not write`,
      ).toEqual([]);

      // The store: writes only under the prefix, by operations that write;
      // deletions only by retention, only of what the lineage wrote; never a
      // planted object, one outside the prefix, or one the row protects.
      const after = await storeContents(fsStore);
      const changes = storeChanges(before, after);
      if (!WRITING_OPERATIONS.has(operation)) {
        expect(changes, `${what}: changed the store`).toEqual({
          created: [],
          modified: [],
          deleted: [],
        });
      }
      expect(
        [...changes.created, ...changes.modified, ...changes.deleted].filter(
          (key) => !key.startsWith(`${PREFIX}/`),
        ),
        `${what}: touched keys outside the prefix`,
      ).toEqual([]);
      if (operation !== 'retention')
        expect(changes.deleted, `${what}: deleted objects`).toEqual([]);
      const retired = new Set(operation === 'retention' ? (row.retentionMayDelete ?? []) : []);
      const untouchable = new Set([
        ...planted.created.filter((key) => !retired.has(key)),
        ...(row.protect?.(paths) ?? []),
        OUTSIDE_KEY,
      ]);
      // A planted change to an object of the baseline (a corrupted segment)
      // is still the lineage's key: retention may retire it. Rewriting it is
      // never allowed.
      expect(
        [
          ...changes.modified.filter(
            (key) => plantedKeys.includes(key) && key !== `${PREFIX}/LATEST`,
          ),
          ...[...changes.deleted, ...changes.modified].filter((key) => untouchable.has(key)),
        ],
        `${what}: changed or deleted a planted or protected object`,
      ).toEqual([]);
      // What retention deleted was in the baseline: written by this lineage's worker.
      expect(
        changes.deleted.filter((key) => !baseline.has(key) && !retired.has(key)),
        `${what}: deleted objects the lineage did not write`,
      ).toEqual([]);

      // Hostile objects are read only up to their cap.
      if (row.readCap && !operation.startsWith('backupd')) {
        expect(
          metered.bytesRead.get(row.readCap.key) ?? 0,
          `${what}: read more of ${row.readCap.key} than its cap`,
        ).toBeLessThanOrEqual(row.readCap.bytes);
      }
      return outcome;
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  }
}

/**
 * Runs `rows` against every operation, each on a fresh copy of the baseline
 * `build` makes; a restoring operation that refuses must leave its target
 * empty (refused before a byte of the damaged object was used).
 */
export function describeHostileTable(
  label: string,
  rows: readonly Row[],
  build?: (root: string) => Promise<void>,
): void {
  const table = new HostileTable(build);
  beforeAll(() => table.setUp());
  afterAll(() => table.tearDown());
  describe.concurrent.each(rows)(`${label}: $name`, (row) => {
    it.each(OPERATIONS)('%s', async (operation) => {
      await table.run(row, operation, async (store, paths) => {
        const outcome = await runOperation(operation, store, paths);
        if (RESTORING_OPERATIONS.has(operation) && outcome.result === 'refused') {
          const entries = await readdir(paths.target).catch(() => []);
          expect(entries, `${operation} refused but left files in the target`).toEqual([]);
        }
        return outcome;
      });
    });
  });
}
