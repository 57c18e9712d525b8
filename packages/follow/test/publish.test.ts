/**
 * publishState against real readers and real kills: hundreds of publishes
 * of states of different sizes (growing, shrinking, rewriting most pages)
 * while reader processes run read transactions that check an invariant
 * every state keeps, and a publisher process killed at random moments,
 * after which a read-only reader gets a whole state or a refusal, never a
 * torn one, and a read-write open rolls back to the state before.
 */
import { spawn } from 'node:child_process';
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createTarget, publishState } from '../src/publish.ts';
import { testWorkspace } from './test-workspace.ts';

const owned = testWorkspace();
const children = owned.children;

const TOTAL = 1_000_000;

/** State `n`: a WAL-mode database whose `v` column sums to TOTAL, of a size that depends on `n`. */
function makeState(path: string, n: number): void {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode=WAL; CREATE TABLE a (id INTEGER PRIMARY KEY, v INTEGER, pad BLOB)');
  const rows = 50 + (n % 5) * 400;
  db.exec('BEGIN');
  const insert = db.prepare('INSERT INTO a (v, pad) VALUES (?, randomblob(?))');
  for (let i = 0; i < rows; i += 1)
    insert.run(i === 0 ? TOTAL - (rows - 1) : 1, 100 + (n % 3) * 300);
  db.exec('COMMIT');
  db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  db.close();
}

const READER = `
import { existsSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { writeFileSync } from 'node:fs';
const [path, stopFile, total, readyFile] = process.argv.slice(2);
let reads = 0, torn = 0, errors = 0, firstError = null;
while (!existsSync(stopFile)) {
  try {
    const db = new DatabaseSync(path, { readOnly: true, timeout: 10000 });
    for (let i = 0; i < 50; i += 1) {
      db.exec('BEGIN');
      const sum = db.prepare('SELECT sum(v) AS s FROM a').get().s;
      const ok = i % 25 !== 0 || db.prepare('PRAGMA integrity_check').get().integrity_check === 'ok';
      db.exec('COMMIT');
      reads += 1;
      if (sum !== Number(total) || !ok) torn += 1;
      if (reads === 1) writeFileSync(readyFile, '');
    }
    db.close();
  } catch (error) {
    errors += 1;
    firstError ??= String(error);
  }
}
console.log(JSON.stringify({ reads, torn, errors, firstError }));
`;

function workspace(label = 'backupd-publish-'): string {
  return owned.directory(label);
}

describe('publishState', () => {
  it('readers never see a torn state through 300 publishes of states of different sizes', async () => {
    const directory = workspace();
    const states = Array.from({ length: 7 }, (_, n) => {
      const path = join(directory, `state-${n}.db`);
      makeState(path, n);
      return path;
    });
    const target = join(directory, 'target.db');
    createTarget(target, states[0]!);
    const script = join(directory, 'reader.mjs');
    writeFileSync(script, READER);
    const stopFile = join(directory, 'stop');
    const reports = [1, 2].map((reader) => {
      const ready = join(directory, `ready-${reader}`);
      const child = spawn(process.execPath, [script, target, stopFile, String(TOTAL), ready], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      children.push(child);
      let out = '';
      child.stdout!.on('data', (chunk) => {
        out += String(chunk);
      });
      return new Promise<{ reads: number; torn: number; errors: number; firstError: string }>(
        (resolve) => child.on('exit', () => resolve(JSON.parse(out))),
      );
    });
    while (!existsSync(join(directory, 'ready-1')) || !existsSync(join(directory, 'ready-2')))
      await new Promise((resolve) => setTimeout(resolve, 10));
    let pages = 0;
    for (let round = 1; round <= 300; round += 1) {
      pages += publishState(target, states[round % states.length]!).pagesWritten;
      await new Promise((resolve) => setTimeout(resolve, 3));
    }
    writeFileSync(stopFile, '');
    for (const report of await Promise.all(reports)) {
      expect(report.reads, JSON.stringify(report)).toBeGreaterThan(1000);
      expect(report, JSON.stringify(report)).toMatchObject({ torn: 0, errors: 0 });
    }
    expect(pages).toBeGreaterThan(300);
    expect(existsSync(`${target}-journal`)).toBe(false);
  }, 120_000);

  it('a publisher killed at any moment leaves the state before or after, never a torn one', async () => {
    const directory = workspace();
    const states = [0, 1, 2, 3].map((n) => {
      const path = join(directory, `state-${n}.db`);
      makeState(path, n + 1);
      return path;
    });
    const target = join(directory, 'target.db');
    createTarget(target, states[0]!);
    const publisher = join(directory, 'publisher.mjs');
    writeFileSync(
      publisher,
      `import { publishState } from ${JSON.stringify(pathToFileURL(join(import.meta.dirname, '../src/publish.ts')).href)};
const [target, ...states] = process.argv.slice(2);
for (let round = 1; ; round += 1) publishState(target, states[round % states.length]);
`,
    );
    let rolledBack = 0;
    for (let attempt = 0; attempt < 12; attempt += 1) {
      const child = spawn(process.execPath, [publisher, target, ...states], {
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      children.push(child);
      await new Promise((resolve) => setTimeout(resolve, 150 + attempt * 37));
      child.kill('SIGKILL');
      await new Promise((resolve) => child.on('exit', resolve));
      const hot = existsSync(`${target}-journal`);
      // Read-only: a whole state, or refused because a rollback is needed.
      try {
        const reader = new DatabaseSync(target, { readOnly: true });
        const sum = reader.prepare('SELECT sum(v) AS s FROM a').get()!.s;
        reader.close();
        expect(sum).toBe(TOTAL);
      } catch (error) {
        expect(hot, String(error)).toBe(true);
        expect(String(error)).toMatch(/readonly|read-only|rollback/i);
      }
      // Read-write (as the next follow opens it): rolled back, whole.
      const writer = new DatabaseSync(target);
      expect(writer.prepare('PRAGMA integrity_check').get()!.integrity_check).toBe('ok');
      expect(writer.prepare('SELECT sum(v) AS s FROM a').get()!.s).toBe(TOTAL);
      writer.close();
      if (hot) rolledBack += 1;
      // Killed between creating the journal and writing it: an empty file,
      // which SQLite never takes for a hot journal (and the next publish rewrites).
      const journal = `${target}-journal`;
      expect(!existsSync(journal) || statSync(journal).size === 0).toBe(true);
    }
    // The kills landed inside a publish at least once (otherwise nothing was tested).
    expect(rolledBack).toBeGreaterThan(0);
  }, 120_000);
});
