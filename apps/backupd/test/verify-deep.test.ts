/**
 * `backupd verify --deep` proves restorability: it rebuilds SQLite restore
 * points into a temporary directory and checks them (integrity_check, page
 * hashes), through the real command. Prefixes: the fixtures in
 * fixtures/*-prefix (see fixtures/README.md; the shrink-regrow one is the
 * damage a plain `verify --deep` called ok), and one built here whose every
 * CRC agrees but whose rebuilt database SQLite calls corrupt.
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
import { encodeCommitFrame } from '@x/source-sqlite';
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
async function corruptPrefix(directory: string): Promise<void> {
  const path = join(directory, 'source.db');
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode = DELETE; CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)');
  const insert = db.prepare("INSERT INTO t (body) VALUES (printf('%0800d', ?))");
  for (let row = 0; row < 20; row += 1) insert.run(row);
  db.close();
  const snapshot = readFileSync(path);
  rmSync(path);
  const pageSize = 4096;
  const log = encodeCommitFrame({
    pageSize,
    databasePages: snapshot.byteLength / pageSize,
    commitTime: Date.parse('2026-12-05T00:00:00Z'),
    walSalt1: 0,
    walSalt2: 0,
    commitFrame: 0,
    pages: new Map([[2, new Uint8Array(pageSize).fill(0x55)]]),
  });
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
