/**
 * Formats are forever: a SQLite prefix written encrypted by the first code
 * with client-side encryption (commit 72369ef, its own `backupd replicate`
 * with `BACKUPD_AGE_RECIPIENTS` and `BACKUPD_AGE_IDENTITY_FILE` of the
 * committed test key `fixtures/encrypted/test-key.txt`, compaction levels of
 * 1 s and 3 s; see `fixtures/README.md`) restores with the current code and
 * that key to exactly what that code's restore produced, verifies clean,
 * lists the same restore points, refuses a copy with one byte of a segment
 * or of a compacted object changed, and takes new commits from the current
 * worker encrypting to the same recipient (the suites of
 * `release-prefixes.ts`). Here also: every envelope of the prefix is
 * `age-x25519` to that recipient alone, and without the key a restore is
 * refused before it writes anything.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ObjectKeyError, restore } from '@x/restore';
import { sqliteMaterializer } from '@x/source-sqlite';
import { FsStore } from '@x/store';
import { afterEach, expect, it } from 'vitest';
import { describeReleasePrefixes, envelopeHeaders, releaseIdentities } from './release-prefixes.ts';

const SET = 'encrypted';
const IDENTITY_FILE = 'test-key.txt';

describeReleasePrefixes({
  set: SET,
  release: '72369ef',
  title: 'the first release with encryption',
  // Level 2 merges nothing inside the exact window (5 min by default), so
  // runs of seconds leave level-1 objects beside the fine segments they replaced.
  sqliteKeyKinds: ['seg', 'snap', 'L1'],
  latestNamesCompacted: true,
  identityFile: IDENTITY_FILE,
});

const fixture = fileURLToPath(new URL(`../fixtures/${SET}/sqlite/`, import.meta.url));
const { prefix } = JSON.parse(readFileSync(join(fixture, 'expected.json'), 'utf8')) as {
  prefix: string;
};
const { identities } = releaseIdentities(SET, IDENTITY_FILE);
const recipient = identities[0]!.recipient.text;

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

function tempDir(label: string): string {
  const directory = mkdtempSync(join(tmpdir(), `${SET}-${label}-`));
  directories.push(directory);
  return directory;
}

it('the test key is the one recipient of every snapshot and log object, all age-x25519', async () => {
  // The comment line age-keygen wrote names the key's recipient.
  expect(readFileSync(releaseIdentities(SET, IDENTITY_FILE).path, 'utf8')).toContain(
    `# public key: ${recipient}`,
  );
  const headers = await envelopeHeaders(join(fixture, 'prefix'), prefix);
  // Snapshots, fine segments and compacted objects alike.
  expect(new Set([...headers.values()].map((header) => header.kind))).toEqual(
    new Set(['snapshot', 'segment', 'compacted']),
  );
  for (const [key, header] of headers)
    expect(
      [header.encryption, header.recipients.map((r) => r.text), header.bodyCrc32],
      key,
    ).toEqual(['age-x25519', [recipient], 0]);
});

it('without the key a restore is refused, naming the recipient, and writes nothing', async () => {
  const root = join(tempDir('prefix'), 'root');
  cpSync(join(fixture, 'prefix'), root, { recursive: true });
  const target = tempDir('no-key');
  const refusal = await restore(new FsStore({ root }), prefix, target, {
    materializer: sqliteMaterializer({ databaseName: 'app.db' }),
  }).catch((error: unknown) => error);
  expect(ObjectKeyError.isInstance(refusal), String(refusal)).toBe(true);
  const error = refusal as ObjectKeyError;
  expect(error.code).toBe('RESTORE_KEY_MISSING');
  expect(error.recipients).toEqual([recipient]);
  expect(error.identities).toEqual([]);
  expect(readdirSync(target)).toEqual([]);
});
