/**
 * A local backup directory must be named absolutely. WHATWG URL parsing reads
 * `file:rel` as `/rel` and `file:../rel` as `/rel`, so before this check such
 * a URL put the backup under the filesystem root. These tests run the real
 * command with its working directory in a temporary directory and prove that
 * every relative or remote file URL is a usage error (exit 2) that names the
 * URL and the forms to use, and that nothing appears at `/<name>` or
 * `<cwd>/<name>`.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  commandLineUrl,
  FileUrlNotAbsoluteError,
  parseStoreUrl,
  StoreUrlError,
} from '../src/store-url.ts';
import { baseEnv, createWalDatabase, runCli, suiteWorkspace } from './helpers/cli.ts';

const ADVICE = 'use file:///absolute/path or a plain absolute path such as /absolute/path';

describe('relative and remote file URLs on the command line', () => {
  const { directory } = suiteWorkspace('file-url');
  // The working directory of every command: `<tmp>/work`, so `file:../x`
  // would land in `<tmp>/x` if it were resolved against it.
  const cwd = join(directory, 'work');
  mkdirSync(cwd);
  const name = `backupd-confinement-${randomBytes(6).toString('hex')}`;
  const placesItMustNotAppear = [`/${name}`, join(cwd, name), join(directory, name)];
  // Should the refusal ever break, the backup lands at `/<name>` (the tests
  // run as root in some environments): remove exactly that, nothing else.
  afterAll(() => {
    for (const path of placesItMustNotAppear) rmSync(path, { recursive: true, force: true });
  });

  beforeAll(() => createWalDatabase(join(cwd, 'app.db')));

  function expectNothingCreated() {
    for (const path of placesItMustNotAppear) expect(existsSync(path), path).toBe(false);
  }

  const refused: readonly { url: string; says: string }[] = [
    { url: `file:${name}`, says: `is a relative file URL: it would name /${name}` },
    { url: `file:./${name}`, says: `is a relative file URL: it would name /${name}` },
    { url: `file:../${name}`, says: `is a relative file URL: it would name /${name}` },
    { url: `file://${name}/backups`, says: `names the host "${name}"` },
  ];

  test.each(refused)(
    'replicate app.db $url: exit 2, the URL named, nothing created',
    async ({ url, says }) => {
      const result = await runCli(['replicate', 'app.db', url], {
        env: baseEnv(),
        cwd,
        timeoutMs: 15_000,
      });
      expect(result.code, result.stderr).toBe(2);
      expect(result.stdout).toBe(''); // nothing started, nothing announced
      expect(result.stderr).toContain(`${JSON.stringify(url)} ${says}`);
      expect(result.stderr).toContain(ADVICE);
      expectNothingCreated();
    },
  );

  test.each(['ls', 'verify', 'lease'])(
    '%s file:<relative>: exit 2 with the same message',
    async (command) => {
      const result = await runCli([command, `file:${name}`], { env: baseEnv(), cwd });
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain(
        `backupd ${command}: "file:${name}" is a relative file URL: it would name /${name}, under the filesystem root, not a directory relative to here; ${ADVICE}\n`,
      );
      expectNothingCreated();
    },
  );

  test('a config file with url: file:<relative>: exit 2, the problem at its path', async () => {
    const config = join(directory, 'relative.yaml');
    writeFileSync(config, `databases:\n  - path: ${join(cwd, 'app.db')}\n    url: file:${name}\n`);
    const result = await runCli(['replicate', '-c', config], { env: baseEnv(), cwd });
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(
      `  databases[0].url: "file:${name}" is a relative file URL: it would name /${name}, under the filesystem root, not a directory relative to here; ${ADVICE}\n`,
    );
    expectNothingCreated();
  });

  test('a plain absolute path names the directory itself, as file:///path does', async () => {
    const backups = join(directory, 'plain');
    // An existing, empty directory: ls of one that does not exist is an error.
    mkdirSync(backups);
    const result = await runCli(['ls', backups, '--json'], { env: baseEnv(), cwd });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('[]\n');
    const fileUrl = await runCli(['ls', `file://${backups}`, '--json'], { env: baseEnv(), cwd });
    expect(fileUrl).toMatchObject({ code: 0, stdout: '[]\n' });
  });
});

describe('parseStoreUrl: file locations', () => {
  test.each([
    ['file:rel', '/rel'],
    ['file:./x', '/x'],
    ['file:../x', '/x'],
    ['FILE:rel', '/rel'],
    ['file:', '/'],
  ])('%s is refused as relative (WHATWG would read it as %s)', (url, parsedAs) => {
    const error = catchError(() => parseStoreUrl(url));
    expect(error).toBeInstanceOf(FileUrlNotAbsoluteError);
    expect(error).toBeInstanceOf(StoreUrlError); // the command line's usage error
    expect(error).toMatchObject({ code: 'STORE_URL_FILE_NOT_ABSOLUTE', url });
    expect((error as Error).message).toBe(
      `${JSON.stringify(url)} is a relative file URL: it would name ${parsedAs}, under the filesystem root, not a directory relative to here; ${ADVICE}`,
    );
  });

  test.each([
    ['file://backups', 'backups'],
    ['file://host/srv/backups', 'host'],
    ['file://example.com/x', 'example.com'],
  ])('%s is refused: it names the host %s', (url, host) => {
    const error = catchError(() => parseStoreUrl(url));
    expect(error).toBeInstanceOf(FileUrlNotAbsoluteError);
    expect((error as Error).message).toMatch(
      new RegExp(
        `^${escapeRegExp(JSON.stringify(url))} names the host "${escapeRegExp(host)}"; .*; ${escapeRegExp(ADVICE)}$`,
      ),
    );
  });

  test.each([
    ['file:///srv/backups', '/srv/backups'],
    ['file:/srv/backups', '/srv/backups'],
    ['file://localhost/srv/backups/', '/srv/backups'],
    ['file:///srv/with%20space', '/srv/with space'],
    ['/srv/backups', '/srv/backups'],
    ['/srv/backups/', '/srv/backups'],
  ])('%s names %s', (url, root) => {
    expect(parseStoreUrl(url)).toEqual({ scheme: 'file', root, prefix: 'backup' });
  });

  test.each(['backups', './backups', '../backups'])(
    'a relative plain path %s is refused, saying to name it absolutely',
    (path) => {
      expect(() => parseStoreUrl(path)).toThrow(
        new StoreUrlError(
          `${JSON.stringify(path)} is a relative path; name a local directory absolutely: /absolute/path or file:///absolute/path`,
        ),
      );
    },
  );

  test.each([
    ['backups', '/home/op/backups'],
    ['./backups', '/home/op/backups'],
    ['../backups', '/home/backups'],
    ['/srv/backups', '/srv/backups'],
    ['file:backups', 'file:backups'],
    ['s3://bucket/prefix', 's3://bucket/prefix'],
  ])('on the command line, %s is given as %s', (text, given) => {
    expect(commandLineUrl(text, '/home/op')).toBe(given);
  });

  test.each(['file:///', 'file://localhost', '/'])('%s (the filesystem root) is refused', (url) => {
    expect(() => parseStoreUrl(url)).toThrow(/the filesystem root cannot be the backup directory/);
  });
});

function catchError(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error('expected an error');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
