/**
 * `backupd verify --deep` proves restorability: it rebuilds SQLite restore
 * points into a temporary directory and checks them (integrity_check, page
 * hashes recorded at capture and predicted by the objects), through the
 * real command. Prefixes: the fixtures in
 * fixtures/*-prefix (see fixtures/README.md; the shrink-regrow one is the
 * damage a plain `verify --deep` called ok), and two built here whose every
 * CRC agrees: one whose rebuilt database SQLite calls corrupt, one whose
 * rebuilt page 2 SQLite accepts but its record says was captured otherwise.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import {
  crc32Hex,
  latestKey,
  type Manifest,
  manifestKey,
  segmentKey,
  serializeLatest,
  serializeManifest,
  snapshotKey,
} from '@x/manifest';
import type { VerifyReport } from '@x/restore';
import { encodeCommitFrame, pageHash } from '@x/source-sqlite';
import { FsStore } from '@x/store';
import { afterAll, describe, expect, it } from 'vitest';
import { baseEnv, runCli } from './helpers/cli.ts';

const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'verify-deep-test-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const env = baseEnv();

/** A copy of a fixture prefix (verify only reads, but a test never touches the repository's copy). */
function copyOf(fixture: string): string {
  const directory = mkdtempSync(join(root, `${fixture}-`));
  cpSync(join(FIXTURES, fixture), directory, { recursive: true });
  return directory;
}

function scratch(): string {
  return mkdtempSync(join(root, 'scratch-'));
}

const verifyCli = (args: readonly string[]) =>
  runCli(['verify', ...args], { env, timeoutMs: 60_000 });

describe('backupd verify --deep', () => {
  it('passes a healthy prefix, rebuilding the newest restore point by default and every one with --all', async () => {
    const url = `file://${copyOf('healthy-prefix')}`;
    const directory = scratch();
    const byDefault = await verifyCli([url, '--deep', '--scratch', directory]);
    expect(byDefault.stderr).toBe('');
    expect(byDefault.code).toBe(0);
    expect(byDefault.stdout).toContain(
      'backup/manifest/00000000000000000078.json: ok (commit 78, rebuilt)',
    );
    expect(byDefault.stdout).toContain(
      'backup/manifest/00000000000000000005.json: ok (commit 5)\n',
    );
    expect(byDefault.stdout).toContain(
      'verified 4 restore point(s) with CRC-32 checks; rebuilt 1 (integrity_check and page hashes)',
    );
    expect(readdirSync(directory)).toEqual([]);

    const every = await verifyCli([url, '--deep', '--all', '--scratch', directory]);
    expect(every.code).toBe(0);
    expect(every.stdout).toContain(
      'backup/manifest/00000000000000000005.json: ok (commit 5, rebuilt)',
    );
    expect(every.stdout).toContain(
      'rebuilt 4 (integrity_check and page hashes, every restore point)',
    );
    expect(readdirSync(directory)).toEqual([]);
  });

  it('fails on the shrink-regrow prefix whose restore is malformed, naming the restore point', async () => {
    const url = `file://${copyOf('shrink-regrow-prefix')}`;
    const directory = scratch();
    const text = await verifyCli([url, '--deep', '--scratch', directory]);
    expect(text.code).toBe(1);
    expect(text.stdout).toContain('LATEST: backup/manifest/00000000000000000002.json PROBLEM');
    expect(text.stdout).toContain('backup/manifest/00000000000000000000.json: ok (commit 0)\n');
    expect(text.stdout).toContain(
      'backup/manifest/00000000000000000002.json: problems (commit 2, rebuilt)',
    );
    expect(text.stdout).toContain('FAILED: 1 of 2 restore point(s) have problems');
    expect(readdirSync(directory)).toEqual([]);

    const json = await verifyCli([url, '--deep', '--json']);
    expect(json.code).toBe(1);
    const report = JSON.parse(json.stdout) as VerifyReport;
    expect(report).toMatchObject({ ok: false, rebuilt: 1, latest: { ok: false } });
    const broken = report.manifests.find(
      (m) => m.key === 'backup/manifest/00000000000000000002.json',
    )!;
    expect(broken).toMatchObject({ status: 'problems', rebuilt: true });
    // The restore refuses the patch of page 20 (no base), or, where it
    // would apply it over zeros, integrity_check finds the pages above 19
    // broken; either way the problem names a page of the regrown range.
    expect(broken.problems.length).toBeGreaterThan(0);
    for (const problem of broken.problems) {
      expect(['rebuild', 'integrity-check']).toContain(problem.kind);
      expect(problem.message).toMatch(/page (2\d|3[0-4])\b/);
    }
  });

  it('fails on a restore point whose every CRC agrees but whose rebuilt database is corrupt', async () => {
    const directory = mkdtempSync(join(root, 'corrupt-'));
    await corruptPrefix(directory);
    const result = await verifyCli([`file://${directory}`, '--deep']);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(
      'backup/manifest/00000000000000000001.json: problems (commit 1, rebuilt)',
    );
    expect(result.stdout).toMatch(
      /\n {2}- rebuilt, integrity_check fails: PRAGMA integrity_check of the rebuilt database answers: \S/,
    );
    // Without --deep the objects are all there, with the sizes recorded.
    const shallow = await verifyCli([`file://${directory}`]);
    expect(shallow.code).toBe(0);
  });

  it('fails on a page rebuilt from a patch other than the tap captured, where integrity_check and the objects agree', async () => {
    const directory = mkdtempSync(join(root, 'stale-base-'));
    await writePrefix(directory, staleBasePatch);
    const result = await verifyCli([`file://${directory}`, '--deep', '--json']);
    expect(result.code).toBe(1);
    const report = JSON.parse(result.stdout) as VerifyReport;
    const point = report.manifests.find(
      (m) => m.key === 'backup/manifest/00000000000000000001.json',
    )!;
    expect(point).toMatchObject({ status: 'problems', rebuilt: true });
    expect(point.problems).toHaveLength(1);
    expect(point.problems[0]).toMatchObject({ kind: 'page-hash', page: 2 });
    expect(point.problems[0]!.message).toMatch(
      /page 2 of the rebuilt database hashes [0-9a-f]{16}, and commit 1 of the log recorded [0-9a-f]{16}/,
    );
    // The objects are intact, and `restore` refuses the same restore point.
    expect((await verifyCli([`file://${directory}`])).code).toBe(0);
    const restored = await runCli(['restore', `file://${directory}`, join(directory, 'out.db')], {
      env,
      timeoutMs: 60_000,
    });
    expect(restored.code).not.toBe(0);
    expect(restored.stderr).toMatch(/page 2 rebuilt from a patch hashes/);
  });

  it('refuses --all or --scratch without --deep, and a scratch directory that does not exist', async () => {
    const url = `file://${copyOf('healthy-prefix')}`;
    const all = await verifyCli([url, '--all']);
    expect(all.code).toBe(2);
    expect(all.stderr).toContain('--all is an option of --deep');
    const missing = await verifyCli([url, '--deep', '--scratch', join(root, 'no-such-dir')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('not an existing directory');
  });
});

/**
 * A restore point of a real database and one commit that rewrites its
 * table's root page with garbage: size and CRC-32 of every object agree.
 */
function corruptPrefix(directory: string): Promise<void> {
  return writePrefix(directory, (snapshot, pageSize) =>
    encodeCommitFrame({
      ...RECORD_FIELDS,
      pageSize,
      databasePages: snapshot.byteLength / pageSize,
      pages: new Map([[2, new Uint8Array(pageSize).fill(0x55)]]),
    }),
  );
}

const RECORD_FIELDS = {
  commitTime: Date.parse('2026-12-05T00:00:00Z'),
  walSalt1: 0,
  walSalt2: 0,
  commitFrame: 0,
};

/**
 * One commit that patches a digit of a row on page 2, recorded with the
 * hash of the page the patch gave over another version of it (one digit
 * further on differs): what a tap that kept a wrong base would ship. The
 * rebuilt database is sound to SQLite, and its objects predict it.
 */
function staleBasePatch(snapshot: Buffer, pageSize: number): Uint8Array {
  const page = snapshot.subarray(pageSize, 2 * pageSize);
  const digits = page.indexOf('0'.repeat(100));
  const patch = { offset: digits, bytes: Buffer.from('7') };
  const captured = Buffer.from(page);
  captured[digits + 10] = '1'.charCodeAt(0);
  captured.set(patch.bytes, patch.offset);
  return encodeCommitFrame({
    ...RECORD_FIELDS,
    pageSize,
    databasePages: snapshot.byteLength / pageSize,
    pages: new Map(),
    patches: new Map([[2, [patch]]]),
    patchHashes: new Map([[2, pageHash(captured)]]),
  });
}

/** A prefix `backup` holding one restore point (LATEST): a real database's snapshot and `logOf`'s one commit over it. */
async function writePrefix(
  directory: string,
  logOf: (snapshot: Buffer, pageSize: number) => Uint8Array,
): Promise<void> {
  const path = join(directory, 'source.db');
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode = DELETE; CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)');
  const insert = db.prepare("INSERT INTO t (body) VALUES (printf('%0800d', ?))");
  for (let row = 0; row < 20; row += 1) insert.run(row);
  db.close();
  const snapshot = readFileSync(path);
  rmSync(path);
  const log = logOf(snapshot, snapshot.readUInt16BE(16));
  const store = new FsStore({ root: directory });
  const prefix = 'backup';
  const lineage = 'verify-deep-test';
  const snapshotObject = snapshotKey(prefix, 0, 0);
  const segment = segmentKey(prefix, 0, 0, log.byteLength);
  await store.put(snapshotObject, snapshot);
  await store.put(segment, log);
  const manifest: Manifest = {
    formatVersion: 1,
    lineage,
    createdAt: '2026-12-05T00:00:00Z',
    commitSeq: 1,
    oldestCommitSeq: 0,
    walGeneration: 0,
    files: [
      {
        name: 'sqlite.snapshot',
        key: snapshotObject,
        size: snapshot.byteLength,
        crc32: crc32Hex(snapshot),
        frames: 0,
        lineage,
      },
    ],
    segments: [{ key: segment, size: log.byteLength, crc32: crc32Hex(log), frames: 1, lineage }],
  };
  const key = manifestKey(prefix, 1);
  await store.put(key, new TextEncoder().encode(serializeManifest(manifest, { prefix })));
  await store.put(latestKey(prefix), new TextEncoder().encode(serializeLatest(key)));
}
