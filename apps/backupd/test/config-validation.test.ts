/**
 * Configuration problems reach the operator through the command line: exit
 * code 2, nothing started, and on standard error every problem as
 * `path: problem` (the unit tests in src/config.test.ts cover the validator's
 * full table; these prove the CLI surfaces it, for files and for the
 * single-database environment).
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { baseEnv, runCli } from './helpers/cli.ts';

const directory = mkdtempSync(join(tmpdir(), 'backupd-config-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

/** The problem lines of a ConfigError as printed: `  path: problem`. */
function problemLines(stderr: string): string[] {
  return stderr
    .split('\n')
    .filter((line) => line.startsWith('  '))
    .map((line) => line.slice(2));
}

const GOOD_URL = 'file:///var/backups/app';

const CASES: readonly { name: string; yaml: string; problems: readonly string[] }[] = [
  {
    name: 'an unknown scheme in the second database',
    yaml: `databases:\n  - path: a.db\n    url: ${GOOD_URL}\n  - path: b.db\n    url: s4://bucket/b\n`,
    problems: ['databases[1].url: unknown scheme "s4"'],
  },
  {
    name: 'a database without a URL',
    yaml: 'databases:\n  - path: a.db\n',
    problems: [
      'databases[0].url: required, where to back up to (e.g. s3://bucket/prefix or file:///backups/app)',
    ],
  },
  {
    name: 'an interval that is not a duration',
    yaml: `databases:\n  - path: a.db\n    url: ${GOOD_URL}\n    interval: soon\n`,
    problems: ['databases[0].interval: must be a duration such as "1s" or "500ms", got "soon"'],
  },
  {
    name: 'a lease TTL below the minimum',
    yaml: `databases:\n  - path: a.db\n    url: ${GOOD_URL}\n    leaseTtl: 1s\n`,
    problems: ['databases[0].leaseTtl: must be at least 3000ms'],
  },
  {
    name: 'an unknown setting',
    yaml: `databases:\n  - path: a.db\n    url: ${GOOD_URL}\n    colour: red\n`,
    problems: [
      'databases[0].colour: unknown setting (known: path, directory, pattern, recursive, sleepAfter, rescan, type, url, urls, interval, restorePointInterval, retention, leaseTtl, shutdownGrace, snapshotInterval, snapshotLogFactor, compaction, exactWindow, checkpoint, conditional, encryption)',
    ],
  },
  {
    name: 'an endpoint that is not http(s)',
    yaml: 'databases:\n  - path: a.db\n    url: s3://bucket/a?endpoint=ftp://example.com\n',
    problems: [
      'databases[0].url: endpoint must be an http(s) URL such as https://s3.example.com, got a ftp: URL',
    ],
  },
  {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the config file's ${VAR} syntax, literally
    name: 'an unset ${VAR}',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the config file's ${VAR} syntax, literally
    yaml: 'databases:\n  - path: a.db\n    url: s3://bucket/${BACKUPD_TEST_UNSET_BUCKET_PREFIX}\n',
    problems: [
      'databases[0].url: environment variable "BACKUPD_TEST_UNSET_BUCKET_PREFIX" is not set',
      'databases[0].url: s3 URL needs a prefix after the bucket (e.g. s3://name/db1)',
    ],
  },
  {
    name: 'several problems at once, all reported',
    yaml: `listen: everywhere\ndatabases:\n  - path: a.db\n    url: ${GOOD_URL}\n  - path: a.db\n    url: ${GOOD_URL}\n  - path: c.db\n    url: file:///var/backups/c\n    retention: 0\n`,
    problems: [
      'listen: must be "host:port" such as "127.0.0.1:9090", got string "everywhere"',
      `databases[1].path: same database as databases[0] (${join(directory, 'a.db')})`,
      `databases[1].url: ${GOOD_URL} is also used by databases[0]; one prefix holds one database`,
      'databases[2].retention: must be a window such as "24h", "7d" or "90m" (1m to 3650d) or a count of restore points (a whole number, at least 1), got number 0',
    ],
  },
];

describe.concurrent('config validation through the CLI', () => {
  test.each(CASES)('$name: exit 2 with the exact problems', async ({ name, yaml, problems }) => {
    const path = join(directory, `${name.replace(/[^a-z0-9]+/gi, '-')}.yaml`);
    writeFileSync(path, yaml);
    const result = await runCli(['replicate', '-c', path], { env: baseEnv() });
    expect(result.code, result.stderr).toBe(2);
    expect(result.stdout).toBe(''); // nothing started, nothing announced
    expect(result.stderr).toContain(`backupd replicate: invalid configuration in ${path}:\n`);
    expect(problemLines(result.stderr)).toEqual(problems);
  });

  test('YAML that does not parse', async () => {
    const path = join(directory, 'broken.yaml');
    writeFileSync(path, 'databases: [\n');
    const result = await runCli(['replicate', '-c', path], { env: baseEnv() });
    expect(result.code).toBe(2);
    expect(problemLines(result.stderr)).toHaveLength(1);
    expect(problemLines(result.stderr)[0]).toMatch(/^not valid YAML: /);
  });

  test('a config file that does not exist', async () => {
    const path = join(directory, 'missing.yaml');
    const result = await runCli(['replicate', '-c', path], { env: baseEnv() });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      `backupd replicate: cannot read the config file ${path}: ENOENT\n`,
    );
  });

  test('the single-database environment is validated the same way', async () => {
    const result = await runCli(['replicate', join(directory, 'app.db'), GOOD_URL], {
      env: baseEnv({ BACKUPD_INTERVAL: 'fast', BACKUPD_LEASE_TTL: '2h' }),
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('invalid configuration in command line and environment:\n');
    expect(problemLines(result.stderr)).toEqual([
      'databases[0].interval: must be a duration such as "1s" or "500ms", got "fast"',
      'databases[0].leaseTtl: must be at most 1h',
    ]);
  });

  test('a store URL on the command line', async () => {
    const result = await runCli(['ls', 's3://bucket'], { env: baseEnv() });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'backupd ls: s3 URL needs a prefix after the bucket (e.g. s3://name/db1)\n',
    );
  });
});

/** The entries of `directory` whose names contain `name` (the database and anything beside it). */
function filesNamed(directory: string, name: string): string[] {
  return readdirSync(directory).filter((entry) => entry.includes(name));
}

describe.concurrent('refusals at start', () => {
  test('a database that is not in WAL mode: exit 1, saying how to switch', async () => {
    const path = join(directory, 'rollback.db');
    const { DatabaseSync } = await import('node:sqlite');
    const database = new DatabaseSync(path);
    database.exec('CREATE TABLE notes (body TEXT)');
    database.close();
    const result = await runCli(['replicate', path, GOOD_URL], { env: baseEnv() });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      `backupd replicate: ${path} uses journal_mode=delete; backupd needs WAL mode and does not change it.`,
    );
    expect(filesNamed(directory, 'rollback.db')).toEqual(['rollback.db']);
  });

  test('a database that does not exist: exit 1 naming it as missing, and nothing is left at or beside that path', async () => {
    const path = join(directory, 'mistyped.db');
    const result = await runCli(['replicate', path, GOOD_URL], { env: baseEnv() });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      `backupd replicate: ${path} does not exist; backupd backs up an existing database and never creates one`,
    );
    expect(result.stderr).not.toContain('journal_mode');
    expect(filesNamed(directory, 'mistyped.db')).toEqual([]);
  });
});
