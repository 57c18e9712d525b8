/**
 * What an operator reads in the first hour: each message names the thing that
 * is wrong and the way out, with the exit code the README gives. The CLI runs
 * in this process through `main` (the same entry the binary calls), against
 * local directories only.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { COMMANDS, main } from '../src/main.ts';
import { SUPPORTED_SCHEMES } from '../src/store-url.ts';

const scratch = mkdtempSync(join(tmpdir(), 'backupd-messages-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function sink(): { stream: Writable; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk.toString('utf8'));
      callback();
    },
  });
  return { stream, text: () => chunks.join('') };
}

async function run(
  argv: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = sink();
  const stderr = sink();
  const code = await main(argv, {
    env: { BACKUPD_CPU_PRIORITY: 'normal', ...env },
    stdout: stdout.stream,
    stderr: stderr.stream,
    cwd: scratch,
  });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

describe('--log-level', () => {
  it('refuses an unknown level with exit 2, naming the valid ones, before anything starts', async () => {
    const database = join(scratch, 'log-level.db');
    const result = await run(['replicate', database, '--log-level', 'loud']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'backupd replicate: --log-level must be one of trace, debug, info, warn, error, fatal, silent; got "loud"\n',
    );
    expect(result.stderr).toContain('Usage: backupd replicate');
    // Refused where the options are read: no backup announced, nothing created.
    expect(result.stdout).toBe('');
    expect(() => readFileSync(`${database}-backups`)).toThrow();
  });

  it('is checked before the other arguments: a bad level wins over a missing <db>', async () => {
    const result = await run(['replicate', '--log-level', 'LOUD']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      'backupd replicate: --log-level must be one of trace, debug, info, warn, error, fatal, silent; got "LOUD"\n' +
        'Usage: backupd replicate <db> [<url>] [options]\n',
    );
  });

  it('answers --help even with a bad level (help first, as before)', async () => {
    const result = await run(['replicate', '--log-level', 'loud', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^Usage: backupd replicate/);
  });
});

describe('ls', () => {
  it('says the directory does not exist and exits 1, for a file URL and a plain path', async () => {
    const missing = join(scratch, 'nonexistent');
    for (const url of [`file://${missing}`, missing]) {
      const result = await run(['ls', url]);
      expect(result.code, url).toBe(1);
      expect(result.stderr).toBe(`backupd ls: nothing at ${url}: the directory does not exist\n`);
      expect(result.stdout).toBe('');
      const json = await run(['ls', url, '--json']);
      expect(json.code, `${url} --json`).toBe(1);
    }
  });

  it('still lists an existing directory without backups as having no restore points', async () => {
    const empty = join(scratch, 'empty-backups');
    mkdirSync(empty);
    const result = await run(['ls', `file://${empty}`]);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('no restore points\n');
  });
});

describe('restore', () => {
  it('refuses an existing database file naming the file and the real flags (exit 3)', async () => {
    const backups = join(scratch, 'restore-backups');
    mkdirSync(backups);
    const target = join(scratch, 'existing.db');
    writeFileSync(target, 'the application database');
    const result = await run(['restore', `file://${backups}`, target]);
    expect(result.code).toBe(3);
    expect(result.stderr).toBe(
      `backupd restore: the database file ${target} already exists; nothing was restored\n` +
        'use --force to overwrite, or --if-missing to keep what is there\n',
    );
    expect(result.stderr).not.toMatch(/directory|pass force/);
    expect(readFileSync(target, 'utf8')).toBe('the application database');
  });

  it('names the database files backupd would replace when the database itself is absent', async () => {
    const backups = join(scratch, 'restore-backups-2');
    const directory = join(scratch, 'side-files');
    mkdirSync(backups);
    mkdirSync(directory);
    writeFileSync(join(directory, 'app.db-wal'), '');
    const result = await run(['restore', `file://${backups}`, join(directory, 'app.db')]);
    expect(result.code).toBe(3);
    expect(result.stderr).toContain(
      `backupd restore: ${join(directory, 'app.db')} does not exist, but files of it do (${join(directory, 'app.db-wal')}); nothing was restored\n`,
    );
  });

  it.each([
    ['2026-11-29T08:00:00', 'needs a timezone: add Z for UTC or an offset such as +02:00'],
    ['2026-11-29', 'needs a timezone'],
    ['2026-11-29 08:00', 'needs a timezone'],
    ['yesterday', 'must be an RFC 3339 timestamp with a timezone'],
    ['2026-11-29T08:00:00 GMT', 'must be an RFC 3339 timestamp with a timezone'],
    ['2026-11-29 08:00:00 GMT', 'must be an RFC 3339 timestamp with a timezone'],
  ])('refuses --time %s (exit 2): %s', async (time, message) => {
    const result = await run(['restore', 'file:///nowhere', join(scratch, 't.db'), '--time', time]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`backupd restore: --time ${message}`);
    expect(result.stderr).toContain(`got "${time}"`);
  });

  it.each([
    '2026-11-29T08:00:00Z',
    '2026-11-29T08:00:00.250z',
    '2026-11-29T09:00:00+01:00',
    '2026-11-29 03:00-05:00',
  ])('accepts --time %s and goes on to the bucket', async (time) => {
    const backups = join(scratch, `time-${time.replace(/[^0-9]/g, '')}`);
    mkdirSync(backups);
    const result = await run([
      'restore',
      `file://${backups}`,
      join(backups, 'x.db'),
      '--time',
      time,
    ]);
    // Past the parsing: the (empty) bucket holds no restore point.
    expect(result.stderr).not.toContain('--time');
    expect(result.stderr).toContain('no restore point');
    expect(result.code).toBe(1);
  });
});

describe('durations', () => {
  it('refuses leaseTtl: 5 in a config file, naming the key and suggesting 5s (exit 2)', async () => {
    const config = join(scratch, 'bare.yml');
    writeFileSync(
      config,
      `databases:\n  - path: app.db\n    url: file://${scratch}/bare-backups\n    leaseTtl: 5\n`,
    );
    const result = await run(['replicate', '-c', config]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'databases[0].leaseTtl: a bare number (5) is not a duration: write "5s" for seconds (units: ms, s, m, h)\n',
    );
  });

  it('refuses BACKUPD_INTERVAL=5, naming the variable (exit 2)', async () => {
    const result = await run(
      ['replicate', join(scratch, 'env.db'), `file://${scratch}/env-backups`],
      { BACKUPD_INTERVAL: '5' },
    );
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'BACKUPD_INTERVAL: a bare number (5) is not a duration: write "5s" for seconds (units: ms, s, m, h)\n',
    );
  });
});

describe('help', () => {
  // Each example, run by a shell with `backupd` stubbed to print its words,
  // passes exactly the words it shows: nothing is cut at an unquoted `&`,
  // `;` or `|`, nothing expanded.
  const examples = COMMANDS.flatMap((command) =>
    command.help
      .split('\nExamples:\n')[1]!
      .split('\n\n')[0]!
      .split('\n')
      .map((line) => [command.name, line.trim()] as const),
  );

  it.each(examples)('%s: %s is what a shell passes', (_command, line) => {
    const cwd = join(scratch, 'shell');
    mkdirSync(cwd, { recursive: true });
    const result = spawnSync(
      'bash',
      ['--norc', '--noprofile', '-c', `backupd() { printf '%s\\n' "$@"; }\n${line}\nwait`],
      {
        cwd,
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      },
    );
    expect(result.stderr).toBe('');
    const words = result.stdout.split('\n').slice(0, -1);
    expect(words.join(' ')).toBe(line.replace(/^backupd /, '').replace(/['"]/g, ''));
  });

  it('has the examples this checks', () => {
    expect(examples.some(([, line]) => line.includes('&region=auto'))).toBe(true);
  });
});

describe('store URL schemes', () => {
  it('documents in the README every scheme an error message lists', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const table = readme.split('## Store URLs')[1]!.split('\n\n')[1]!;
    for (const scheme of SUPPORTED_SCHEMES)
      expect(table, scheme).toMatch(new RegExp(`^\\| \`${scheme}:`, 'm'));
    expect(table).toMatch(/`memory:name` \| for backupd's own tests only/);
  });
});
