/**
 * An encrypted framed store directory through the `backupd` commands:
 * `restore --type framed` opens its sealed archives, chain and side files
 * with `--age-identity-file` and refuses without one before the target
 * exists; `verify --deep` checks it with the identity; `ls` lists it without.
 */
import { mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { generateIdentity, parseRecipient } from '@x/age-envelope';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { FramedDirSource } from '@x/source-framed';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../src/main.ts';
import { appendCommits, type CasePaths, NOW_MS, PREFIX, prepareCase } from './hostile/bucket.ts';

class Collector extends Writable {
  text = '';
  override _write(chunk: Buffer | string, _encoding: BufferEncoding, done: () => void): void {
    this.text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    done();
  }
}

async function cli(args: readonly string[], cwd: string) {
  const stdout = new Collector();
  const stderr = new Collector();
  const exitCode = await main(args, { stdout, stderr, env: { PATH: process.env.PATH }, cwd });
  return { exitCode, text: `${stdout.text}${stderr.text}` };
}

describe('an encrypted framed store through the backupd commands', () => {
  let root: string;
  let paths: CasePaths;
  let keyFile: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'backupd-framed-encryption-'));
    const prepared = await prepareCase(root);
    paths = prepared.paths;
    const key = generateIdentity();
    keyFile = join(root, 'backup-key.txt');
    await writeFile(keyFile, `${key.identity}\n`, { mode: 0o600 });
    const worker = new BackupWorker({
      store: prepared.store,
      prefix: PREFIX,
      source: new FramedDirSource({ directory: paths.source }),
      clock: new FakeClock({ wallMs: NOW_MS }),
      manifestIntervalMs: 0,
      operationTimeoutMs: 10_000,
      encryption: { recipients: [parseRecipient(key.recipient)] },
    });
    // An archive: the WAL so far archived as wal.1.archive, a new one started.
    await rename(join(paths.source, 'wal.bin'), join(paths.source, 'wal.1.archive'));
    await writeFile(join(paths.source, 'wal.bin'), new Uint8Array(0));
    await appendCommits(paths.source, 3, 4);
    await worker.runOnce();
  });

  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('restore --type framed refuses without an identity, before the target exists', async () => {
    const refused = await cli(['restore', '--type', 'framed', paths.storeUrl, paths.target], root);
    expect(refused.exitCode).toBe(1);
    expect(refused.text).toContain('.archive.bko');
    await expect(readdir(paths.target)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('restore --type framed opens the sealed archive and side files with --age-identity-file', async () => {
    const restored = await cli(
      ['restore', '--type', 'framed', paths.storeUrl, paths.target, '--age-identity-file', keyFile],
      root,
    );
    expect(restored.exitCode, restored.text).toBe(0);
    for (const name of ['wal.1.archive', 'wal.bin', 'roles.json', 'keys.json', 'wal.genesis'])
      expect(await readFile(join(paths.target, name)), name).toEqual(
        await readFile(join(paths.source, name)),
      );
  });

  it('verify --deep checks it with the identity; ls lists it without one', async () => {
    const deep = await cli(
      ['verify', '--deep', paths.storeUrl, '--age-identity-file', keyFile],
      root,
    );
    expect(deep.exitCode, deep.text).toBe(0);
    const listed = await cli(['ls', paths.storeUrl], root);
    expect(listed.exitCode, listed.text).toBe(0);
  });
});
