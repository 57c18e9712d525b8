/**
 * `backupd ls` says what it checked: "manifest checked" (the manifest passed
 * restore's checks, its objects were not read), "verified" with --deep
 * (every object's size and CRC-32), "corrupt: <why>" otherwise; and whether
 * LATEST is readable and where a restore of the latest state goes instead.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { latestKey, manifestKey, parseManifest } from '@x/manifest';
import { FsStore } from '@x/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../src/main.ts';
import { buildBaseline, type CasePaths, casePaths, copyCase, PREFIX } from './hostile/bucket.ts';

class Collector extends Writable {
  text = '';
  override _write(chunk: Buffer | string, _encoding: BufferEncoding, done: () => void): void {
    this.text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    done();
  }
}

let scratch: string;
let baseline: string;
let copies = 0;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'backupd-ls-status-'));
  baseline = join(scratch, 'baseline');
  await buildBaseline(baseline);
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

async function freshCase(): Promise<{ paths: CasePaths; store: FsStore }> {
  copies += 1;
  const root = join(scratch, `case-${copies}`);
  await copyCase(baseline, root);
  const paths = casePaths(root);
  return { paths, store: new FsStore({ root: paths.storeRoot, fsync: false }) };
}

async function ls(
  paths: CasePaths,
  ...extra: string[]
): Promise<{ code: number; lines: string[] }> {
  const stdout = new Collector();
  const stderr = new Collector();
  const code = await main(['ls', paths.storeUrl, ...extra], {
    stdout,
    stderr,
    env: { PATH: process.env.PATH },
    cwd: paths.root,
  });
  expect(stderr.text).toBe('');
  return { code, lines: stdout.text.trimEnd().split('\n') };
}

/** The row of the restore point at `commit` (its COMMITS cell ends in it). */
function rowOf(lines: string[], commit: number): string {
  const row = lines.find((line) => new RegExp(`^\\*?\\s+(\\d+\\.\\.)?${commit}\\s`).test(line));
  expect(row, lines.join('\n')).toBeDefined();
  return row!;
}

const M4 = manifestKey(PREFIX, 4);

describe('backupd ls: what STATUS rests on', () => {
  it('a sound bucket: "manifest checked", never "ok", and says objects were not read', async () => {
    const { paths } = await freshCase();
    const { code, lines } = await ls(paths);
    expect(code).toBe(0);
    expect(lines[0]).toMatch(/^LATEST\s+COMMITS/);
    for (const commit of [2, 3, 4]) {
      expect(rowOf(lines, commit)).toMatch(/manifest checked$/);
      expect(rowOf(lines, commit)).not.toMatch(/\sok$/);
    }
    expect(rowOf(lines, 4)).toMatch(/^\*/);
    expect(lines).toContain(
      '"manifest checked": the manifest was read and passed restore\'s checks; its objects were not read (ls --deep reads them)',
    );
  });

  it('--deep: "verified" when every object checks out', async () => {
    const { paths } = await freshCase();
    const { lines } = await ls(paths, '--deep');
    for (const commit of [2, 3, 4]) expect(rowOf(lines, commit)).toMatch(/verified$/);
    expect(lines.join('\n')).not.toContain('manifest checked');
  });

  it('a corrupt manifest LATEST names: corrupt with why, and LATEST is a PROBLEM with the fallback', async () => {
    const { paths, store } = await freshCase();
    await store.put(M4, new TextEncoder().encode('{"formatVersion": 1,'), { mode: 'overwrite' });
    const { code, lines } = await ls(paths);
    expect(code).toBe(0);
    expect(lines[0]).toMatch(`PROBLEM: LATEST names ${M4}, which is corrupt: does not parse`);
    expect(lines[1]).toBe(
      `a restore of the latest state falls back to commit 3 (${manifestKey(PREFIX, 3)}), the newest restore point listed as sound`,
    );
    expect(rowOf(lines, 4)).toMatch(/^\*.*corrupt: does not parse/);
    expect(rowOf(lines, 3)).toMatch(/manifest checked$/);
  });

  it('an object with a bad CRC: "manifest checked" without --deep, corrupt with it', async () => {
    const { paths, store } = await freshCase();
    const manifest = parseManifest((await store.get(M4))!.body, { prefix: PREFIX });
    const segment = manifest.segments.at(-1)!;
    const bytes = Uint8Array.from((await store.get(segment.key))!.body);
    bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 0xff;
    await store.put(segment.key, bytes, { mode: 'overwrite' });
    expect(rowOf((await ls(paths)).lines, 4)).toMatch(/manifest checked$/);
    const deep = await ls(paths, '--deep');
    expect(rowOf(deep.lines, 4)).toMatch(/corrupt: object .* is corrupt: crc32 expected/);
    expect(deep.lines[0]).toContain(`PROBLEM: LATEST names ${M4}, which is corrupt`);
  });

  it('an unreadable LATEST: a PROBLEM, no row marked, and the restore point used instead', async () => {
    const { paths, store } = await freshCase();
    await store.put(latestKey(PREFIX), new TextEncoder().encode('garbage'), { mode: 'overwrite' });
    const { lines } = await ls(paths);
    expect(lines[0]).toMatch(/^PROBLEM: LATEST .*does not hold one manifest key/);
    expect(lines[1]).toBe(
      `a restore of the latest state falls back to commit 4 (${M4}), the newest restore point listed as sound`,
    );
    for (const commit of [2, 3, 4]) expect(rowOf(lines, commit)).not.toMatch(/^\*/);
  });

  it('--json carries what was checked, and the fallback beside the LATEST problem', async () => {
    const { paths, store } = await freshCase();
    await store.put(M4, new TextEncoder().encode('nope'), { mode: 'overwrite' });
    const stdout = new Collector();
    await main(['ls', paths.storeUrl, '--json'], {
      stdout,
      stderr: new Collector(),
      env: { PATH: process.env.PATH },
      cwd: paths.root,
    });
    const listed = JSON.parse(stdout.text) as {
      latestProblem: string;
      latestFallback: { manifestKey: string; commitSeq: number } | null;
      restorePoints: { commitSeq: number; status: string; checked: string; latest: boolean }[];
    };
    expect(listed.latestProblem).toContain(`LATEST names ${M4}, which is corrupt`);
    expect(listed.latestFallback).toEqual({ manifestKey: manifestKey(PREFIX, 3), commitSeq: 3 });
    expect(
      listed.restorePoints.map((point) => [point.commitSeq, point.status, point.checked]),
    ).toEqual([
      [2, 'ok', 'manifest'],
      [3, 'ok', 'manifest'],
      [4, 'problems', 'manifest'],
    ]);
  });
});
