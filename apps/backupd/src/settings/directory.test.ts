import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../config.ts';

function parse(text: string) {
  return parseConfig(text, { env: {}, baseDir: '/srv' });
}

function problemsOf(text: string): readonly string[] {
  try {
    parse(text);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('a directory entry in the config file', () => {
  it('takes a directory instead of a path, with the command line defaults', () => {
    const config = parse(
      'databases:\n  - directory: tenants\n    url: s3://b/tenants\n    interval: 2s\n  - path: app.db\n    url: s3://b/app\n',
    );
    expect(config.databases[0]).toMatchObject({
      path: '/srv/tenants',
      type: 'sqlite',
      intervalMs: 2000,
      directory: { pattern: '*.db', recursive: false, quietMs: 30_000, rescanMs: 10_000 },
    });
    expect(config.databases[1]!.directory).toBeUndefined();
  });

  it('reads pattern, recursive, sleepAfter and rescan', () => {
    const config = parse(
      "databases:\n  - directory: /data/t\n    url: s3://b/t\n    pattern: 'tenant-*.sqlite'\n    recursive: true\n    sleepAfter: 2m\n    rescan: 30s\n",
    );
    expect(config.databases[0]!.directory).toEqual({
      pattern: 'tenant-*.sqlite',
      recursive: true,
      quietMs: 120_000,
      rescanMs: 30_000,
    });
  });

  it.each([
    [
      'path and directory',
      'databases:\n  - directory: t\n    path: a.db\n    url: s3://b/t\n',
      'databases[0]: give either "path" or "directory", not both',
    ],
    [
      'a directory option without a directory',
      'databases:\n  - path: a.db\n    url: s3://b/t\n    pattern: "*.db"\n',
      'databases[0].pattern: goes with "directory"',
    ],
    [
      'a pattern with a slash',
      'databases:\n  - directory: t\n    url: s3://b/t\n    pattern: "sub/*.db"\n',
      'databases[0].pattern: the pattern "sub/*.db" must be a file name glob, without "/"',
    ],
    [
      'a framed directory',
      'databases:\n  - directory: t\n    type: framed\n    url: s3://b/t\n',
      "databases[0].type: a directory's databases are SQLite databases",
    ],
    [
      'a rescan too short',
      'databases:\n  - directory: t\n    url: s3://b/t\n    rescan: 10ms\n',
      'databases[0].rescan: must be between 1s and 1h, got string "10ms"',
    ],
    [
      'recursive not a boolean',
      'databases:\n  - directory: t\n    url: s3://b/t\n    recursive: yes please\n',
      'databases[0].recursive: must be true or false, got string "yes please"',
    ],
  ])('refuses %s', (_what, text, problem) => {
    expect(problemsOf(text)).toContain(problem);
  });
});
