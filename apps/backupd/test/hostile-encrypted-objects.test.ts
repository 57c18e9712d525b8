/**
 * Hostile encrypted objects, through the real `backupd` command (restore,
 * verify --deep, ls) on a SQLite backup: an object re-encrypted to another
 * key, headers swapped between two objects, a snapshot cut at each age chunk
 * boundary (and one byte short, and inside the age header), a flipped
 * payload or nonce byte, an altered header MAC, a plaintext object in an
 * encrypted generation and the reverse, and no identity at all. Every
 * refused restore exits 1, names the object, creates no target, and no
 * output shows a secret key. The untouched baselines restore exactly, so the
 * table cannot pass on a bucket that refuses everything.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { ObjectStore } from '@x/store';
import { readSegmentObjectHeader } from '@x/wal-segment';
import { beforeAll, describe, expect, it } from 'vitest';
import { baseEnv, type CliResult, type Env, runCli, suiteWorkspace } from './helpers/cli.ts';
import { databaseHash } from './helpers/content-hash.ts';
import {
  AGE_SEALED_CHUNK_BYTES,
  type AgeLayout,
  ageLayout,
  buildSqliteBaseline,
  type CasePaths,
  casePaths,
  copyBaselineStore,
  flippedAt,
  headerOnBodyOf,
  macAltered,
  makeTestKey,
  NEWEST_COMMIT,
  type NewestObjects,
  newestObjects,
  openStore,
  plantObject,
  reencoded,
  storedBytes,
  type TestKey,
} from './hostile/encrypted.ts';

/** Age payload chunks of the encrypted baseline's snapshot: the cuts below are its boundaries. */
const SNAPSHOT_CHUNKS = 4;
const TIMEOUT_MS = 120_000;

/** What a row's planter and expectations see. */
interface Context {
  readonly store: ObjectStore;
  /** The newest restore point's objects, before planting. */
  readonly objects: NewestObjects;
  /** The key the baselines are (or are re-encoded) to. */
  readonly key: TestKey;
  /** A key of no baseline. */
  readonly other: TestKey;
}

interface Row {
  readonly name: string;
  readonly baseline: 'encrypted' | 'clear';
  readonly plant: (context: Context) => Promise<void>;
  /** Fragments restore's refusal (stderr) and `verify --deep`'s report must each hold. */
  readonly says: (context: Context) => readonly string[];
}

const last = (objects: NewestObjects): string => objects.segments.at(-1)!;
const beforeLast = (objects: NewestObjects): string => objects.segments.at(-2)!;

/** Replaces the object at `key` by `change(stored)`, its manifest entries rewritten to match. */
async function replace(
  context: Context,
  key: string,
  change: (stored: Uint8Array) => Uint8Array,
): Promise<void> {
  await plantObject(context.store, key, change(await storedBytes(context.store, key)));
}

/** Each of the two objects keeps its header around the other's encrypted body. */
async function swapBodies(context: Context, first: string, second: string): Promise<void> {
  const a = await storedBytes(context.store, first);
  const b = await storedBytes(context.store, second);
  await plantObject(context.store, first, headerOnBodyOf(a, b));
  await plantObject(context.store, second, headerOnBodyOf(b, a));
}

const ANOTHER_HEADER = 'the encrypted body was written under another header';

const corrupt = (key: string, field: string, problem: string): string =>
  `object ${key} is corrupt: ${field}: ${problem}`;

/** The snapshot cut to `length(layout, size)` bytes. */
function cutSnapshot(
  name: string,
  length: (layout: AgeLayout, size: number) => number,
  problem: string,
): Row {
  return {
    name: `snapshot cut ${name}`,
    baseline: 'encrypted',
    plant: (c) =>
      replace(c, c.objects.snapshot, (s) => s.slice(0, length(ageLayout(s), s.byteLength))),
    says: (c) => [corrupt(c.objects.snapshot, 'body', problem)],
  };
}

/** Chunk `chunk` fails to open as the payload's last: the payload was cut after it, or it was changed. */
const failsAsLast = (chunk: number): string =>
  `does not decrypt: age payload chunk ${chunk} does not authenticate as the last chunk`;
const chunkBoundaries = Array.from({ length: SNAPSHOT_CHUNKS - 1 }, (_, index) => index + 1);

const ROWS: readonly Row[] = [
  {
    name: 'a segment re-encrypted (same header fields) to another key only',
    baseline: 'encrypted',
    plant: (c) =>
      replace(c, last(c.objects), (s) => reencoded(s, [c.key.identity], [c.other.recipient])),
    says: (c) => [
      corrupt(last(c.objects), 'encryption', `it is encrypted to ${c.other.recipient.text}`),
    ],
  },
  {
    name: 'a segment’s header on the encrypted body of the segment before it',
    baseline: 'encrypted',
    plant: async (c) => {
      const donor = await storedBytes(c.store, beforeLast(c.objects));
      await replace(c, last(c.objects), (s) => headerOnBodyOf(s, donor));
    },
    says: (c) => [corrupt(last(c.objects), 'body', ANOTHER_HEADER)],
  },
  {
    name: 'two segments, each header on the other’s encrypted body',
    baseline: 'encrypted',
    plant: (c) => swapBodies(c, beforeLast(c.objects), last(c.objects)),
    says: (c) => [corrupt(beforeLast(c.objects), 'body', ANOTHER_HEADER)],
  },
  cutSnapshot(
    'inside the age header',
    (l) => l.ageStart + 10,
    'does not decrypt: not a valid age v1 file',
  ),
  cutSnapshot(
    'inside the nonce',
    (l) => l.payloadStart - 1,
    'does not decrypt: the age payload ends before its nonce',
  ),
  cutSnapshot(
    'right after the nonce (no chunk)',
    (l) => l.payloadStart,
    'does not decrypt: age payload chunk 0 is cut short',
  ),
  ...chunkBoundaries.map((k) =>
    cutSnapshot(
      `at the boundary after chunk ${k - 1}`,
      (l) => l.payloadStart + k * AGE_SEALED_CHUNK_BYTES,
      failsAsLast(k - 1),
    ),
  ),
  cutSnapshot('one byte short', (_l, size) => size - 1, failsAsLast(SNAPSHOT_CHUNKS - 1)),
  {
    name: 'a byte of the snapshot’s second chunk flipped',
    baseline: 'encrypted',
    plant: (c) =>
      replace(c, c.objects.snapshot, (s) =>
        flippedAt(s, ageLayout(s).payloadStart + AGE_SEALED_CHUNK_BYTES + 100),
      ),
    says: (c) => [
      corrupt(
        c.objects.snapshot,
        'body',
        'does not decrypt: age payload chunk 1 does not authenticate',
      ),
    ],
  },
  {
    name: 'a byte of a segment’s payload flipped',
    baseline: 'encrypted',
    plant: (c) => replace(c, last(c.objects), (s) => flippedAt(s, ageLayout(s).payloadStart + 3)),
    says: (c) => [corrupt(last(c.objects), 'body', failsAsLast(0))],
  },
  {
    name: 'a byte of a segment’s payload nonce flipped',
    baseline: 'encrypted',
    plant: (c) => replace(c, last(c.objects), (s) => flippedAt(s, ageLayout(s).payloadStart - 1)),
    says: (c) => [corrupt(last(c.objects), 'body', failsAsLast(0))],
  },
  {
    name: 'a segment whose age header MAC line is altered',
    baseline: 'encrypted',
    plant: (c) => replace(c, last(c.objects), macAltered),
    says: (c) => [
      corrupt(
        last(c.objects),
        'body',
        'does not decrypt: the age header was changed after it was written (its MAC does not match)',
      ),
    ],
  },
  {
    name: 'a plaintext segment where an encrypted one is expected',
    baseline: 'encrypted',
    plant: (c) => replace(c, last(c.objects), (s) => reencoded(s, [c.key.identity], [])),
    says: (c) => [corrupt(last(c.objects), 'encryption', 'it is not encrypted, its generation')],
  },
  {
    name: 'an encrypted segment where a plaintext one is expected',
    baseline: 'clear',
    plant: (c) => replace(c, last(c.objects), (s) => reencoded(s, [], [c.key.recipient])),
    says: (c) => [
      corrupt(last(c.objects), 'encryption', `it is encrypted to ${c.key.recipient.text}`),
      `${c.objects.snapshot} is not encrypted`,
    ],
  },
];

describe('hostile encrypted objects through the backupd command', () => {
  const { directory } = suiteWorkspace('hostile-encrypted');
  const env: Env = baseEnv();
  const baselines = {
    encrypted: join(directory, 'baseline-encrypted'),
    clear: join(directory, 'baseline-clear'),
  };
  let key: TestKey;
  let other: TestKey;
  let cases = 0;

  beforeAll(async () => {
    key = await makeTestKey(join(directory, 'test-key.txt'));
    other = await makeTestKey(join(directory, 'other-key.txt'));
    await buildSqliteBaseline(baselines.encrypted, {
      recipients: [key.recipient],
      identities: [key.identity],
    });
    await buildSqliteBaseline(baselines.clear, { recipients: [], identities: [] });
  }, TIMEOUT_MS);

  async function freshCase(baseline: 'encrypted' | 'clear'): Promise<CasePaths> {
    cases += 1;
    return copyBaselineStore(baselines[baseline], join(directory, `case-${cases}`));
  }

  /** `backupd <args>`; no secret key in anything it printed. */
  async function backupd(args: readonly string[], extraEnv: Env = {}): Promise<CliResult> {
    const result = await runCli(args, { env: { ...env, ...extraEnv } });
    const printed = result.stdout + result.stderr;
    expect(printed).not.toContain(key.secret);
    expect(printed).not.toContain(other.secret);
    expect(printed).not.toMatch(/AGE-SECRET-KEY-1/i);
    return result;
  }

  const withKey = (): string[] => ['--age-identity-file', key.file];

  /** Restore refuses with exit 1 saying each of `says`, and no target appears. */
  async function expectRestoreRefused(
    paths: CasePaths,
    says: readonly string[],
    identity: readonly string[] = withKey(),
  ): Promise<void> {
    const refused = await backupd(['restore', paths.storeUrl, paths.target, ...identity]);
    expect(refused.code, refused.stdout + refused.stderr).toBe(1);
    for (const fragment of says) expect(refused.stderr).toContain(fragment);
    expect(existsSync(paths.restoreParent), 'a refused restore created its target').toBe(false);
  }

  async function expectDeepVerifyRefused(paths: CasePaths, says: readonly string[]) {
    const deep = await backupd(['verify', paths.storeUrl, '--deep', ...withKey()]);
    expect(deep.code, deep.stdout + deep.stderr).toBe(1);
    for (const fragment of says) expect(deep.stdout + deep.stderr).toContain(fragment);
  }

  /** `ls` reads manifests only: it lists the newest restore point whatever its objects hold. */
  async function expectListed(paths: CasePaths): Promise<void> {
    const listed = await backupd(['ls', paths.storeUrl]);
    expect(listed.code, listed.stderr).toBe(0);
    const latest = listed.stdout.split('\n').find((line) => line.startsWith('*'));
    expect(latest, listed.stdout).toContain(`0..${NEWEST_COMMIT} `);
  }

  async function contextOf(paths: CasePaths): Promise<Context> {
    const store = openStore(paths);
    return { store, objects: await newestObjects(store), key, other };
  }

  describe('the baselines', () => {
    it('every snapshot and segment of the encrypted baseline is encrypted to the test key only', async () => {
      const store = openStore(casePaths(baselines.encrypted));
      const objects = await newestObjects(store);
      expect(objects.segments).toHaveLength(NEWEST_COMMIT);
      for (const objectKey of [objects.snapshot, ...objects.segments]) {
        const header = readSegmentObjectHeader(await storedBytes(store, objectKey));
        expect(header.encryption, objectKey).toBe('age-x25519');
        expect(
          header.recipients.map((recipient) => recipient.text),
          objectKey,
        ).toEqual([key.recipient.text]);
      }
      const snapshot = await storedBytes(store, objects.snapshot);
      expect(ageLayout(snapshot).chunks).toBe(SNAPSHOT_CHUNKS);
    });

    it('every snapshot and segment of the clear baseline is in clear', async () => {
      const store = openStore(casePaths(baselines.clear));
      const objects = await newestObjects(store);
      for (const objectKey of [objects.snapshot, ...objects.segments])
        expect(readSegmentObjectHeader(await storedBytes(store, objectKey)).encryption).toBe(
          'none',
        );
    });

    it.each([
      ['encrypted', '--age-identity-file'],
      ['encrypted', 'BACKUPD_AGE_IDENTITY_FILE'],
      ['clear', 'no identity'],
    ] as const)(
      'the untouched %s baseline, given %s, restores exactly, verifies deeply and lists',
      async (baseline, how) => {
        const paths = await freshCase(baseline);
        const flag = how === '--age-identity-file' ? withKey() : [];
        const fromEnv =
          how === 'BACKUPD_AGE_IDENTITY_FILE' ? { BACKUPD_AGE_IDENTITY_FILE: key.file } : {};
        const restored = await backupd(['restore', paths.storeUrl, paths.target, ...flag], fromEnv);
        expect(restored.code, restored.stderr).toBe(0);
        expect(databaseHash(paths.target)).toBe(
          databaseHash(casePaths(baselines[baseline]).database),
        );
        const deep = await backupd(['verify', paths.storeUrl, '--deep', ...flag], fromEnv);
        expect(deep.code, deep.stdout + deep.stderr).toBe(0);
        await expectListed(paths);
      },
      TIMEOUT_MS,
    );
  });

  describe.each(ROWS)('$name', (row) => {
    it(
      'restore and verify --deep refuse it, naming the object; ls lists',
      async () => {
        const paths = await freshCase(row.baseline);
        const context = await contextOf(paths);
        await row.plant(context);
        const says = row.says(context);
        await expectRestoreRefused(paths, says);
        await expectDeepVerifyRefused(paths, says);
        await expectListed(paths);
      },
      TIMEOUT_MS,
    );
  });

  describe('no identity given', () => {
    it(
      'restore refuses naming every locked object and the recipient; ls and a shallow verify pass',
      async () => {
        const paths = await freshCase('encrypted');
        const { objects } = await contextOf(paths);
        await expectRestoreRefused(
          paths,
          [
            `no age identity given opens ${objects.segments.length + 1} encrypted objects`,
            objects.snapshot,
            ...objects.segments,
            `(encrypted to ${key.recipient.text})`,
            'no age identity was given',
          ],
          [],
        );
        await expectListed(paths);
        const shallow = await backupd(['verify', paths.storeUrl]);
        expect(shallow.code, shallow.stdout + shallow.stderr).toBe(0);
        const deep = await backupd(['verify', paths.storeUrl, '--deep']);
        expect(deep.code, deep.stdout + deep.stderr).toBe(1);
        expect(deep.stdout + deep.stderr).toContain(key.recipient.text);
      },
      TIMEOUT_MS,
    );
  });
});
