/**
 * Encryption at rest, end to end through the `backupd` command with keys
 * made by the real `age-keygen`: what reaches the bucket holds no database
 * content and opens with the standard `age` tool; restore, verify and ls
 * work with an identity and refuse without one, before writing anything;
 * a writer without the identity starts a new generation at each restart;
 * a recipient change starts one too, and the retired key keeps reading only
 * the older generation. No secret key appears in any output, log, metric
 * or page.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { zstdDecompressSync } from 'node:zlib';
import { FsStore } from '@x/store';
import { readSegmentObjectHeader } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import {
  baseEnv,
  getText,
  listeningUrl,
  type RunningProcess,
  runCli,
  startBackupd,
  suiteWorkspace,
  transcript,
  waitFor,
} from './helpers/cli.ts';
import { databaseHash } from './helpers/content-hash.ts';
import { bucketFiles, createRestartDatabase, snapshots } from './helpers/restart-bucket.ts';

const bin = fileURLToPath(new URL('../../../.servers/bin/', import.meta.url));
const AGE = join(bin, 'age');
const AGE_KEYGEN = join(bin, 'age-keygen');
const present = existsSync(AGE) && existsSync(AGE_KEYGEN);
if (!present && process.env.CI === 'true')
  throw new Error(
    `the age command is required under CI=true: run scripts/install-servers.sh (${AGE})`,
  );

/** Text no object in the bucket may show: it is in every row the application writes. */
const MARKER = 'confidential-row-marker';

describe.skipIf(!present)('encryption at rest through the backupd command', () => {
  const { directory, running } = suiteWorkspace('encryption');
  const env = baseEnv({ BACKUPD_RESTORE_POINT_INTERVAL: '1s' });

  function keygen(name: string): { file: string; recipient: string; secret: string } {
    const file = join(directory, name);
    execFileSync(AGE_KEYGEN, ['-o', file], { stdio: 'pipe' });
    const recipient = execFileSync(AGE_KEYGEN, ['-y', file], { encoding: 'utf8' }).trim();
    const secret = readFileSync(file, 'utf8').match(/AGE-SECRET-KEY-1[0-9A-Z]+/)![0];
    return { file, recipient, secret };
  }

  function commitMarked(database: string, rows: number): void {
    const application = new DatabaseSync(database);
    const insert = application.prepare('INSERT INTO t (body) VALUES (?)');
    for (let i = 0; i < rows; i += 1) insert.run(Buffer.from(`${MARKER} ${i} `.repeat(40)));
    application.close();
  }

  /** One `replicate` life until a restore point holds what was committed, then SIGTERM. */
  async function life(database: string, url: string, extraEnv: Record<string, string>) {
    const backupd = startBackupd(
      ['replicate', database, url, '--log-format', 'json', '--listen', '127.0.0.1:0'],
      { env: { ...env, ...extraEnv } },
    );
    running.push(backupd);
    await waitFor(
      'a restore point',
      () =>
        backupd
          .logEvents()
          .some(
            (event) =>
              event.event === 'backup.restore_point_written' ||
              event.event === 'backup.generation_continued',
          ) || undefined,
      { describe: () => backupd.describe(), timeoutMs: 30_000 },
    );
    return backupd;
  }

  async function stop(backupd: RunningProcess): Promise<void> {
    expect(await backupd.stop('SIGTERM', 60_000), backupd.describe()).toEqual({
      code: 0,
      signal: null,
    });
  }

  /** Every snapshot and log object in the bucket: its key and stored bytes. */
  async function contentObjects(bucket: string): Promise<{ key: string; body: Uint8Array }[]> {
    const store = new FsStore({ root: bucket, fsync: false });
    const keys = (await store.list('backup/')).objects
      .map((object) => object.key)
      .filter((key) => /\.(seg|snap)$/.test(key));
    return Promise.all(keys.map(async (key) => ({ key, body: (await store.get(key))!.body })));
  }

  it('stores no content in clear, restores only with an identity, and keeps secret keys out of every output', async () => {
    const first = keygen('first-key.txt');
    const second = keygen('second-key.txt');
    const database = createRestartDatabase(join(directory, 'app.db'));
    commitMarked(database, 20);
    const bucket = join(directory, 'backups');
    const url = pathToFileURL(bucket).href;

    // Life 1: recipients and the identity on the writer.
    const writer = await life(database, url, {
      BACKUPD_AGE_RECIPIENTS: first.recipient,
      BACKUPD_AGE_IDENTITY_FILE: first.file,
    });
    commitMarked(database, 20);
    await waitFor(
      'the new commits shipped',
      async () => {
        const listed = await runCli(['ls', url, '--json'], { env });
        const points = JSON.parse(listed.stdout) as { commitSeq: number }[];
        return points.some((point) => point.commitSeq >= 20) || undefined;
      },
      { describe: () => writer.describe(), timeoutMs: 30_000 },
    );
    const base = await listeningUrl(writer);
    const pages = await Promise.all(
      ['/metrics', '/', '/healthz'].map((path) => getText(`${base}${path}`)),
    );
    await stop(writer);

    // Every content object is encrypted to the recipient, and none shows a row.
    const objects = await contentObjects(bucket);
    expect(objects.length).toBeGreaterThan(1);
    for (const { key, body } of objects) {
      const header = readSegmentObjectHeader(body);
      expect(header.encryption, key).toBe('age-x25519');
      expect(
        header.recipients.map((recipient) => recipient.text),
        key,
      ).toEqual([first.recipient]);
      expect(Buffer.from(body).includes(MARKER), key).toBe(false);
    }
    const rawFiles = readdirSync(bucket, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => readFileSync(join(entry.parentPath, entry.name)));
    expect(rawFiles.some((bytes) => bytes.includes(MARKER))).toBe(false);

    // The standard tools open a snapshot: the body after the header, age -d, then zstd.
    const snapshot = objects.find((object) => object.key.endsWith('.snap'))!;
    const bodyFile = join(directory, 'snapshot.age');
    writeFileSync(
      bodyFile,
      snapshot.body.subarray(readSegmentObjectHeader(snapshot.body).headerBytes),
    );
    const image = zstdDecompressSync(
      execFileSync(AGE, ['-d', '-i', first.file, bodyFile], { maxBuffer: 1 << 28 }),
    );
    expect(image.subarray(0, 16).toString('latin1')).toBe('SQLite format 3\0');
    expect(image.includes(MARKER)).toBe(true);

    // No identity, or the wrong one: refused before the target exists, naming the recipient.
    for (const args of [[], ['--age-identity-file', second.file]]) {
      const target = join(directory, `refused-${args.length}`, 'app.db');
      const refused = await runCli(['restore', url, target, ...args], { env });
      expect(refused.code, refused.stderr).toBe(1);
      expect(refused.stderr).toContain(first.recipient);
      expect(existsSync(join(directory, `refused-${args.length}`))).toBe(false);
    }
    // Several identity files, the second one opening it: exact.
    const target = join(directory, 'restored', 'app.db');
    const restored = await runCli(
      [
        'restore',
        url,
        target,
        '--age-identity-file',
        second.file,
        '--age-identity-file',
        first.file,
      ],
      { env },
    );
    expect(restored.code, restored.stderr).toBe(0);
    expect(databaseHash(target)).toBe(databaseHash(database));
    // The same identity from the environment.
    const fromEnv = join(directory, 'restored-env', 'app.db');
    const viaEnv = await runCli(['restore', url, fromEnv], {
      env: { ...env, BACKUPD_AGE_IDENTITY_FILE: first.file },
    });
    expect(viaEnv.code, viaEnv.stderr).toBe(0);

    const deep = await runCli(['verify', url, '--deep', '--age-identity-file', first.file], {
      env,
    });
    expect(deep.code, deep.stdout + deep.stderr).toBe(0);
    const locked = await runCli(['verify', url, '--deep'], { env });
    expect(locked.code).toBe(1);
    expect(locked.stdout).toContain(first.recipient);
    const listed = await runCli(['ls', url, '--json'], { env });
    expect(listed.code, listed.stderr).toBe(0);

    for (const text of [...transcript, ...pages.map((page) => page.body)]) {
      expect(text).not.toContain(first.secret);
      expect(text).not.toContain(second.secret);
      expect(text).not.toMatch(/AGE-SECRET-KEY-1/i);
    }
  }, 240_000);

  it('a writer without the identity starts a generation per life; a recipient change starts one, and the retired key reads only the older', async () => {
    const retired = keygen('retired-key.txt');
    const current = keygen('current-key.txt');
    const database = createRestartDatabase(join(directory, 'rotate.db'));
    const bucket = join(directory, 'rotate-backups');
    const url = pathToFileURL(bucket).href;

    await stop(await life(database, url, { BACKUPD_AGE_RECIPIENTS: retired.recipient }));
    const firstSnapshots = snapshots(bucketFiles(bucket));
    expect(firstSnapshots).toHaveLength(1);
    const oldPoint = (
      JSON.parse((await runCli(['ls', url, '--json'], { env })).stdout) as {
        manifestKey: string;
      }[]
    )[0]!.manifestKey;

    // A restart holding recipients only: the previous life's own key is gone.
    const again = await life(database, url, { BACKUPD_AGE_RECIPIENTS: retired.recipient });
    await stop(again);
    const skipped = again
      .logEvents()
      .find((event) => event.event === 'backup.continuation_skipped');
    expect(String(skipped?.reason)).toContain('no age identity configured');
    expect(snapshots(bucketFiles(bucket))).toHaveLength(2);

    // Rotation: the current key replaces the retired one; a new generation at once.
    commitMarked(database, 5);
    const rotated = await life(database, url, {
      BACKUPD_AGE_RECIPIENTS: current.recipient,
      BACKUPD_AGE_IDENTITY_FILE: current.file,
    });
    await stop(rotated);
    expect(snapshots(bucketFiles(bucket))).toHaveLength(3);
    const newest = (await contentObjects(bucket)).filter((object) =>
      readSegmentObjectHeader(object.body).recipients.some((r) => r.text === current.recipient),
    );
    expect(newest.length).toBeGreaterThan(0);
    for (const object of newest)
      expect(readSegmentObjectHeader(object.body).recipients.map((r) => r.text)).toEqual([
        current.recipient,
      ]);

    const latestWithRetired = await runCli(
      [
        'restore',
        url,
        join(directory, 'retired-latest', 'app.db'),
        '--age-identity-file',
        retired.file,
      ],
      { env },
    );
    expect(latestWithRetired.code).toBe(1);
    expect(latestWithRetired.stderr).toContain(current.recipient);
    const latest = join(directory, 'current-latest', 'app.db');
    const withCurrent = await runCli(
      ['restore', url, latest, '--age-identity-file', current.file],
      { env },
    );
    expect(withCurrent.code, withCurrent.stderr).toBe(0);
    expect(databaseHash(latest)).toBe(databaseHash(database));
    const older = await runCli(
      [
        'restore',
        url,
        join(directory, 'retired-older', 'app.db'),
        '--manifest',
        oldPoint,
        '--age-identity-file',
        retired.file,
      ],
      { env },
    );
    expect(older.code, older.stderr).toBe(0);
  }, 240_000);
});
