import { DEFAULT_COMPACTION_LEVELS_MS } from '@x/backup-worker';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig, retentionOptions, singleDatabaseConfig } from './config.ts';

const env = { BUCKET: 'my-bucket', EMPTY: '' };

function problemsOf(text: string): readonly string[] {
  try {
    parseConfig(text, { env, baseDir: '/srv' });
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('config validation', () => {
  const cases: [string, string, string][] = [
    [
      'unknown scheme',
      'databases:\n  - path: a.db\n    url: s3://b/p\n  - path: b.db\n    url: s4://b/p\n',
      'databases[1].url: unknown scheme "s4"',
    ],
    [
      'missing url',
      'databases:\n  - path: a.db\n',
      'databases[0].url: required, where to back up to (e.g. s3://bucket/prefix or file:///backups/app)',
    ],
    [
      'missing path',
      'databases:\n  - url: s3://b/p\n',
      'databases[0].path: required, the database file to back up (or "directory")',
    ],
    [
      'no databases',
      'listen: 127.0.0.1:9090\n',
      'databases: must be a non-empty list, got nothing',
    ],
    ['databases not a list', 'databases: 3\n', 'databases: must be a non-empty list, got number 3'],
    [
      'root not a mapping',
      '- a\n',
      '(root): must be a mapping with a "databases" list, got a list',
    ],
    [
      'bad interval',
      'databases:\n  - path: a.db\n    url: s3://b/p\n    interval: soon\n',
      'databases[0].interval: must be a duration such as "1s" or "500ms", got "soon"',
    ],
    [
      'interval too short',
      'databases:\n  - path: a.db\n    url: s3://b/p\n    interval: 10ms\n',
      'databases[0].interval: must be at least 100ms',
    ],
    [
      'lease ttl too short',
      'databases:\n  - path: a.db\n    url: s3://b/p\n    leaseTtl: 1s\n',
      'databases[0].leaseTtl: must be at least 3000ms',
    ],
    [
      'lease ttl too long',
      'databases:\n  - path: a.db\n    url: s3://b/p\n    leaseTtl: 2h\n',
      'databases[0].leaseTtl: must be at most 1h',
    ],
    [
      'retention zero',
      'databases:\n  - path: a.db\n    url: s3://b/p\n    retention: 0\n',
      'databases[0].retention: must be a window such as "24h", "7d" or "90m" (1m to 3650d) or a count of restore points (a whole number, at least 1), got number 0',
    ],
    [
      'retention text',
      'databases:\n  - path: a.db\n    url: s3://b/p\n    retention: many\n',
      'databases[0].retention: must be a window such as "24h", "7d" or "90m" (1m to 3650d) or a count of restore points (a whole number, at least 1), got string "many"',
    ],
    [
      'unknown key',
      'databases:\n  - path: a.db\n    url: s3://b/p\n    intervall: 1s\n',
      'databases[0].intervall: unknown setting (known: path, directory, pattern, recursive, sleepAfter, rescan, type, url, urls, interval, restorePointInterval, retention, leaseTtl, shutdownGrace, snapshotInterval, snapshotLogFactor, compaction, exactWindow, checkpoint, conditional, encryption)',
    ],
    [
      'bad type',
      'databases:\n  - path: a.db\n    url: s3://b/p\n    type: postgres\n',
      'databases[0].type: must be "sqlite" or "framed", got string "postgres"',
    ],
    [
      'checkpoint order',
      'databases:\n  - path: a.db\n    url: s3://b/p\n    checkpoint: { passivePages: 500, truncatePages: 100 }\n',
      'databases[0].checkpoint.truncatePages: must be greater than passivePages (500)',
    ],
    [
      'conditional not a switch',
      'databases:\n  - path: a.db\n    url: s3://b/p\n    conditional: 1\n',
      'databases[0].conditional: must be true or false, got number 1',
    ],
    [
      'checkpoint lock hold not a switch',
      'databases:\n  - path: a.db\n    url: s3://b/p\n    checkpoint: { holdLock: "yes" }\n',
      'databases[0].checkpoint.holdLock: must be true or false, got string "yes"',
    ],
    [
      'credentials in URL',
      'databases:\n  - path: a.db\n    url: s3://key:secret@b/p\n',
      'databases[0].url: credentials in a store URL are not accepted; use the environment or the SDK credential chain',
    ],
    [
      'url without prefix',
      'databases:\n  - path: a.db\n    url: s3://bucket\n',
      'databases[0].url: s3 URL needs a prefix after the bucket (e.g. s3://name/db1)',
    ],
    [
      'unknown url option',
      'databases:\n  - path: a.db\n    url: s3://b/p?colour=red\n',
      'databases[0].url: unknown option "colour" for s3 (known: endpoint, region, forcePathStyle, checksums)',
    ],
    [
      'unset variable',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the config syntax under test
      'databases:\n  - path: a.db\n    url: s3://${NOPE}/p\n',
      'databases[0].url: environment variable "NOPE" is not set',
    ],
    [
      'same prefix twice',
      'databases:\n  - path: a.db\n    url: s3://b/p\n  - path: b.db\n    url: s3://b/p\n',
      'databases[1].url: s3://b/p is also used by databases[0]; one prefix holds one database',
    ],
    [
      'relative file url',
      'databases:\n  - path: a.db\n    url: file://backups\n',
      'databases[0].url: "file://backups" names the host "backups"; a file URL must name a directory on this machine (a directory relative to here is not a file URL); use file:///absolute/path or a plain absolute path such as /absolute/path',
    ],
    [
      'bad listen',
      'listen: everywhere\ndatabases:\n  - path: a.db\n    url: s3://b/p\n',
      'listen: must be "host:port" such as "127.0.0.1:9090", got string "everywhere"',
    ],
    [
      'bare number as a duration',
      'databases:\n  - path: a.db\n    url: s3://b/p\n    leaseTtl: 5\n',
      'databases[0].leaseTtl: a bare number (5) is not a duration: write "5s" for seconds (units: ms, s, m, h)',
    ],
    [
      'bare number as a duration, quoted',
      'databases:\n  - path: a.db\n    url: s3://b/p\n    interval: "2.5"\n',
      'databases[0].interval: a bare number (2.5) is not a duration: write "2.5s" for seconds (units: ms, s, m, h)',
    ],
    ['not yaml', 'databases: [\n', 'not valid YAML'],
  ];
  it.each(cases)('%s', (_label, text, expected) => {
    const problems = problemsOf(text);
    expect(problems.some((problem) => problem.startsWith(expected))).toBe(true);
    if (expected !== 'not valid YAML') expect(problems).toContain(expected);
  });

  it('expands variables, applies defaults and resolves relative paths', () => {
    const config = parseConfig(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the config syntax under test
      'databases:\n  - path: data/a.db\n    url: s3://${BUCKET}/db1?region=${REGION:-eu-west-1}\n',
      {
        env,
        baseDir: '/srv',
      },
    );
    const database = config.databases[0]!;
    expect(database.path).toBe('/srv/data/a.db');
    expect(database.urls[0]!.location).toEqual({
      scheme: 's3',
      bucket: 'my-bucket',
      prefix: 'db1',
      region: 'eu-west-1',
    });
    expect(database.intervalMs).toBe(1000);
    // A window by time: the last 24 hours.
    expect(database.retention).toEqual({ windowMs: 24 * 3_600_000 });
    expect(database.leaseTtlSeconds).toBe(30);
    // The SQLite tap's own defaults, as the README documents them.
    expect(database.checkpoint).toEqual({
      passivePages: 1000,
      truncatePages: 10_000,
      holdLock: true,
    });
  });

  it('reads the snapshot schedule, with the worker defaults and 0 to turn a trigger off', () => {
    const database = (extra: string) =>
      parseConfig(`databases:\n  - path: a.db\n    url: s3://b/p\n${extra}`, {
        env,
        baseDir: '/srv',
      }).databases[0]!;
    // The worker's own defaults: daily, or once the stored log is 2.5 × the database.
    expect(database('').snapshotIntervalMs).toBe(86_400_000);
    expect(database('').snapshotLogFactor).toBe(2.5);
    const set = database('    snapshotInterval: 7d\n    snapshotLogFactor: 2.5\n');
    expect(set.snapshotIntervalMs).toBe(7 * 86_400_000);
    expect(set.snapshotLogFactor).toBe(2.5);
    const off = database('    snapshotInterval: 0s\n    snapshotLogFactor: 0\n');
    expect(off.snapshotIntervalMs).toBe(0);
    expect(off.snapshotLogFactor).toBe(0);
    const fromEnv = singleDatabaseConfig(
      { path: 'app.db', url: 'file:///tmp/backups' },
      {
        env: { BACKUPD_SNAPSHOT_INTERVAL: '6h', BACKUPD_SNAPSHOT_LOG_FACTOR: '8' },
        baseDir: '/srv',
      },
    ).databases[0]!;
    expect(fromEnv.snapshotIntervalMs).toBe(6 * 3_600_000);
    expect(fromEnv.snapshotLogFactor).toBe(8);
  });

  it('refuses a snapshot schedule that would snapshot too often, naming the setting', () => {
    const problems = problemsOf(
      'databases:\n  - path: a.db\n    url: s3://b/p\n    snapshotInterval: 10s\n    snapshotLogFactor: 0.5\n',
    );
    expect(problems).toEqual([
      'databases[0].snapshotInterval: must be at least 1m, or 0s to snapshot only by size',
      'databases[0].snapshotLogFactor: must be a number from 1 to 1000, or 0 to snapshot only by age, got number 0.5',
    ]);
    expect(
      problemsOf('databases:\n  - path: a.db\n    url: s3://b/p\n    snapshotLogFactor: many\n'),
    ).toEqual([
      'databases[0].snapshotLogFactor: must be a number from 1 to 1000, or 0 to snapshot only by age, got string "many"',
    ]);
  });

  it('reports every problem at once', () => {
    const problems = problemsOf('databases:\n  - path: a.db\n    url: s4://b/p\n    interval: x\n');
    expect(problems).toHaveLength(2);
  });

  it('takes the single-database settings from the environment', () => {
    const config = singleDatabaseConfig(
      { path: 'app.db', url: 'file:///tmp/backups' },
      { env: { BACKUPD_INTERVAL: '250ms', BACKUPD_RETENTION: '3' }, baseDir: '/srv' },
    );
    expect(config.databases[0]!.intervalMs).toBe(250);
    expect(config.databases[0]!.retention).toEqual({ count: 3 });
    expect(() =>
      singleDatabaseConfig({ path: 'a.db', url: 'ftp://x/y' }, { env: {}, baseDir: '/' }),
    ).toThrow('unknown scheme "ftp"');
  });

  it('accepts every unit and reads each as the README says', () => {
    const durations = (value: string) =>
      parseConfig(
        `databases:\n  - path: a.db\n    url: s3://b/p\n    interval: ${value}\n    leaseTtl: 1m\n    shutdownGrace: 0s\n    restorePointInterval: 1.5s\n`,
        { env, baseDir: '/srv' },
      ).databases[0]!;
    expect(durations('250ms').intervalMs).toBe(250);
    expect(durations('2s').intervalMs).toBe(2000);
    expect(durations('1h').intervalMs).toBe(3_600_000);
    expect(durations('1s').leaseTtlSeconds).toBe(60);
    expect(durations('1s').shutdownGraceMs).toBe(0);
    expect(durations('1s').restorePointIntervalMs).toBe(1500);
  });

  it('refuses a bare number in a duration variable, naming the variable and suggesting the unit', () => {
    const single = (extra: Record<string, string>) => () =>
      singleDatabaseConfig({ path: 'a.db', url: 'file:///b' }, { env: extra, baseDir: '/srv' });
    for (const name of [
      'BACKUPD_INTERVAL',
      'BACKUPD_RESTORE_POINT_INTERVAL',
      'BACKUPD_LEASE_TTL',
      'BACKUPD_SHUTDOWN_GRACE',
    ]) {
      expect(single({ [name]: '5' }), name).toThrow(
        `${name}: a bare number (5) is not a duration: write "5s" for seconds (units: ms, s, m, h)`,
      );
    }
    // The whole-number settings still take plain numbers.
    expect(
      single({ BACKUPD_RETENTION: '5', BACKUPD_LEASE_TTL: '5s' })().databases[0]!,
    ).toMatchObject({
      retention: { count: 5 },
      leaseTtlSeconds: 5,
    });
  });

  it('takes the CPU priority from the file or the environment, the environment first', () => {
    const file = 'databases:\n  - path: a.db\n    url: file:///b\n';
    const parse = (text: string, extra: Record<string, string> = {}) =>
      parseConfig(text, { env: { ...env, ...extra }, baseDir: '/srv' });
    expect(parse(file).cpuPriority, 'absent: the default applies').toBeUndefined();
    expect(parse(`cpuPriority: low\n${file}`).cpuPriority).toBe('low');
    expect(parse(`cpuPriority: low\n${file}`, { BACKUPD_CPU_PRIORITY: 'normal' }).cpuPriority).toBe(
      'normal',
    );
    expect(problemsOf(`cpuPriority: fast\n${file}`)).toEqual([
      'cpuPriority: must be "idle", "low", "normal", got string "fast"',
    ]);
    const single = (value: string) =>
      singleDatabaseConfig(
        { path: 'a.db', url: 'file:///b' },
        { env: { BACKUPD_CPU_PRIORITY: value }, baseDir: '/srv' },
      );
    expect(single('idle').cpuPriority).toBe('idle');
    expect(() => single('high')).toThrow(
      'BACKUPD_CPU_PRIORITY: must be "idle", "low", "normal", got string "high"',
    );
  });
});

describe('retention', () => {
  const FORMS =
    'must be a window such as "24h", "7d" or "90m" (1m to 3650d) or a count of restore points (a whole number, at least 1)';
  const withRetention = (value: string) =>
    `databases:\n  - path: a.db\n    url: s3://b/p\n    retention: ${value}\n`;
  const retentionOf = (value: string) =>
    parseConfig(withRetention(value), { env, baseDir: '/srv' }).databases[0]!.retention;

  it('takes a duration as a window, in minutes, hours or days', () => {
    expect(retentionOf('90m')).toEqual({ windowMs: 90 * 60_000 });
    expect(retentionOf('24h')).toEqual({ windowMs: 24 * 3_600_000 });
    expect(retentionOf('7d')).toEqual({ windowMs: 7 * 86_400_000 });
    expect(retentionOf('1.5d')).toEqual({ windowMs: 36 * 3_600_000 });
    // A window longer than a day, which the other durations refuse.
    expect(retentionOf('72h')).toEqual({ windowMs: 72 * 3_600_000 });
  });

  it('keeps a bare whole number a count, as before durations were accepted', () => {
    expect(retentionOf('24')).toEqual({ count: 24 });
    expect(retentionOf('1')).toEqual({ count: 1 });
    // Quoted, or from ${VAR}: text of digits is a count too.
    expect(retentionOf('"12"')).toEqual({ count: 12 });
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the config file's ${VAR} syntax, literally
    const expanded = parseConfig(withRetention('${KEEP}'), {
      env: { KEEP: '6' },
      baseDir: '/srv',
    });
    expect(expanded.databases[0]!.retention).toEqual({ count: 6 });
  });

  it('reads BACKUPD_RETENTION as a window or a count by its form', () => {
    const single = (value: string) =>
      singleDatabaseConfig(
        { path: 'a.db', url: 'file:///b' },
        { env: { BACKUPD_RETENTION: value }, baseDir: '/srv' },
      ).databases[0]!.retention;
    expect(single('7d')).toEqual({ windowMs: 7 * 86_400_000 });
    expect(single('30')).toEqual({ count: 30 });
    expect(() => single('soon')).toThrow(`databases[0].retention: ${FORMS}, got string "soon"`);
  });

  it('refuses a window outside 1m to 3650d, naming the key and the bounds', () => {
    expect(problemsOf(withRetention('59s'))).toEqual([
      'databases[0].retention: a window must be from 1m to 3650d, got string "59s"',
    ]);
    expect(problemsOf(withRetention('3651d'))).toEqual([
      'databases[0].retention: a window must be from 1m to 3650d, got string "3651d"',
    ]);
    expect(problemsOf(withRetention('1m'))).toEqual([]);
    expect(problemsOf(withRetention('3650d'))).toEqual([]);
  });

  it('refuses what is neither a window nor a count, saying which forms it takes', () => {
    for (const [value, described] of [
      ['0', 'number 0'],
      ['-3', 'number -3'],
      ['2.5', 'number 2.5'],
      ['"2.5"', 'string "2.5"'],
      ['24x', 'string "24x"'],
      ['[24h]', 'a list'],
      ['{ days: 7 }', 'a mapping'],
      ['true', 'boolean true'],
    ] as const)
      expect(problemsOf(withRetention(value)), value).toEqual([
        `databases[0].retention: ${FORMS}, got ${described}`,
      ]);
  });

  it('becomes the worker option of its form: retainFor for a window, retain for a count', () => {
    expect(retentionOptions({ windowMs: 3_600_000 })).toEqual({ retainFor: 3_600_000 });
    expect(retentionOptions({ count: 5 })).toEqual({ retain: 5 });
  });
});

describe('compaction', () => {
  const FORMS =
    'must be a list of durations such as [30s, 5m, 1h] (ascending, each a whole multiple of the one before), or off';
  const withCompaction = (value: string) =>
    `databases:\n  - path: a.db\n    url: s3://b/p\n    compaction: ${value}\n`;
  const levelsOf = (value: string) =>
    parseConfig(withCompaction(value), { env, baseDir: '/srv' }).databases[0]!.compactionLevelsMs;
  const single = (value: string) =>
    singleDatabaseConfig(
      { path: 'a.db', url: 'file:///b' },
      { env: { BACKUPD_COMPACTION: value }, baseDir: '/srv' },
    ).databases[0]!.compactionLevelsMs;

  it("defaults to the worker's default: the recommended levels", () => {
    const database = parseConfig('databases:\n  - path: a.db\n    url: s3://b/p\n', {
      env,
      baseDir: '/srv',
    }).databases[0]!;
    expect(database.compactionLevelsMs).toEqual(DEFAULT_COMPACTION_LEVELS_MS);
    expect(database.compactionLevelsMs).toEqual([30_000, 300_000, 3_600_000]);
    expect(single('')).toEqual(DEFAULT_COMPACTION_LEVELS_MS);
  });

  it('takes a list of durations, in the flow or the block form', () => {
    expect(levelsOf('[30s, 5m, 1h]')).toEqual([30_000, 300_000, 3_600_000]);
    expect(levelsOf('[10s]')).toEqual([10_000]);
    expect(levelsOf('[1s, 2s, 4s, 8s, 16s, 32s, 64s, 128s, 256s]')).toHaveLength(9);
    expect(levelsOf('\n      - 1m\n      - 10m\n      - 1h\n      - 24h')).toEqual([
      60_000, 600_000, 3_600_000, 86_400_000,
    ]);
    // JSON is YAML too.
    expect(levelsOf('["15s", "1m"]')).toEqual([15_000, 60_000]);
    // ${VAR} inside an item.
    expect(
      parseConfig(
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the config file's ${VAR} syntax, literally
        withCompaction('["${FIRST}", 5m]'),
        { env: { FIRST: '1m' }, baseDir: '/srv' },
      ).databases[0]!.compactionLevelsMs,
    ).toEqual([60_000, 300_000]);
  });

  it('turns compaction off with off (or an empty list)', () => {
    expect(levelsOf('off')).toEqual([]);
    expect(levelsOf('"off"')).toEqual([]);
    expect(levelsOf('[]')).toEqual([]);
  });

  it('reads BACKUPD_COMPACTION as comma-separated durations, or off', () => {
    expect(single('30s,5m,1h')).toEqual([30_000, 300_000, 3_600_000]);
    expect(single(' 1m , 1h ')).toEqual([60_000, 3_600_000]);
    expect(single('off')).toEqual([]);
    expect(() => single('30s,5')).toThrow(
      'BACKUPD_COMPACTION: a bare number (5) is not a duration: write "5s" for seconds (units: ms, s, m, h)',
    );
    expect(() => single('5m,30s')).toThrow(
      'databases[0].compaction: level 2 (30000 ms) is not longer than level 1 (300000 ms)',
    );
    expect(() => single('30s,soon')).toThrow(
      'databases[0].compaction[1]: must be a duration such as "1s" or "500ms", got "soon"',
    );
  });

  it('refuses levels that are not ascending, naming the levels', () => {
    expect(problemsOf(withCompaction('[5m, 30s]'))).toEqual([
      'databases[0].compaction: level 2 (30000 ms) is not longer than level 1 (300000 ms)',
    ]);
    expect(problemsOf(withCompaction('[30s, 30s]'))).toEqual([
      'databases[0].compaction: level 2 (30000 ms) is not longer than level 1 (30000 ms)',
    ]);
  });

  it('refuses a level that is not a whole multiple of the one before', () => {
    expect(problemsOf(withCompaction('[30s, 45s, 1h]'))).toEqual([
      'databases[0].compaction[1]: 45s is not a whole multiple of the level before it (30s)',
    ]);
    expect(problemsOf(withCompaction('[30s, 2m, 5m]'))).toEqual([
      'databases[0].compaction[2]: 5m is not a whole multiple of the level before it (2m)',
    ]);
    expect(problemsOf(withCompaction('[1.5s, 3s]'))).toEqual([]);
  });

  it('refuses more than 9 levels', () => {
    expect(problemsOf(withCompaction('[1s, 2s, 4s, 8s, 16s, 32s, 64s, 128s, 256s, 512s]'))).toEqual(
      ['databases[0].compaction: 10 levels, at most 9'],
    );
  });

  it('refuses an item that is not a duration of 1s to 24h, naming its index', () => {
    for (const [value, problem] of [
      [
        '[30s, soon]',
        'databases[0].compaction[1]: must be a duration such as "1s" or "500ms", got "soon"',
      ],
      [
        '[30, 5m]',
        'databases[0].compaction[0]: a bare number (30) is not a duration: write "30s" for seconds (units: ms, s, m, h)',
      ],
      ['[500ms, 5m]', 'databases[0].compaction[0]: must be at least 1s, got string "500ms"'],
      ['[0s]', 'databases[0].compaction[0]: must be at least 1s, got string "0s"'],
      [
        '[1h, 2d]',
        'databases[0].compaction[1]: must be a duration such as "1s" or "500ms", got "2d"',
      ],
      ['[1h, 48h]', 'databases[0].compaction[1]: must be at most 24h'],
      [
        '[[30s]]',
        'databases[0].compaction[0]: must be a duration such as "1s" or "500ms", got a list',
      ],
    ] as const)
      expect(problemsOf(withCompaction(value)), value).toEqual([problem]);
    // Every bad item at once.
    expect(problemsOf(withCompaction('[soon, 100ms]'))).toHaveLength(2);
  });

  it('refuses what is neither a list nor off, saying which forms it takes', () => {
    for (const [value, described] of [
      ['30s', 'string "30s"'],
      ['"30s, 5m"', 'string "30s, 5m"'],
      ['on', 'string "on"'],
      ['false', 'boolean false'],
      ['30', 'number 30'],
      ['{ level1: 30s }', 'a mapping'],
      ['null', 'null'],
    ] as const)
      expect(problemsOf(withCompaction(value)), value).toEqual([
        `databases[0].compaction: ${FORMS}, got ${described}`,
      ]);
  });
});

describe("the order of a database's problems", () => {
  it('is the order they have always come in, whatever the order of the keys', () => {
    const problems = problemsOf(
      'databases:\n  - path: a.db\n    url: s3://b/p\n    conditional: 1\n    checkpoint: { passivePages: 0, holdLock: "yes" }\n    compaction: on\n    snapshotLogFactor: 0.5\n    snapshotInterval: 10s\n    retention: 0\n    leaseTtl: 1s\n    shutdownGrace: soon\n    restorePointInterval: 10ms\n    interval: 5\n',
    );
    expect(problems).toEqual([
      'databases[0].interval: a bare number (5) is not a duration: write "5s" for seconds (units: ms, s, m, h)',
      'databases[0].restorePointInterval: must be at least 100ms',
      'databases[0].shutdownGrace: must be a duration such as "1s" or "500ms", got "soon"',
      'databases[0].leaseTtl: must be at least 3000ms',
      'databases[0].retention: must be a window such as "24h", "7d" or "90m" (1m to 3650d) or a count of restore points (a whole number, at least 1), got number 0',
      'databases[0].snapshotInterval: must be at least 1m, or 0s to snapshot only by size',
      'databases[0].snapshotLogFactor: must be a number from 1 to 1000, or 0 to snapshot only by age, got number 0.5',
      'databases[0].compaction: must be a list of durations such as [30s, 5m, 1h] (ascending, each a whole multiple of the one before), or off, got string "on"',
      'databases[0].checkpoint.passivePages: must be a whole number of at least 1, got number 0',
      'databases[0].checkpoint.holdLock: must be true or false, got string "yes"',
      'databases[0].conditional: must be true or false, got number 1',
    ]);
  });

  it('checks truncatePages against passivePages as settled, a refused one counting as its default', () => {
    const withCheckpoint = (value: string) =>
      problemsOf(`databases:\n  - path: a.db\n    url: s3://b/p\n    checkpoint: ${value}\n`);
    expect(withCheckpoint('{ passivePages: 20000, truncatePages: 0 }')).toEqual([
      'databases[0].checkpoint.truncatePages: must be a whole number of at least 1, got number 0',
      'databases[0].checkpoint.truncatePages: must be greater than passivePages (20000)',
    ]);
    expect(withCheckpoint('{ passivePages: 0, truncatePages: 500 }')).toEqual([
      'databases[0].checkpoint.passivePages: must be a whole number of at least 1, got number 0',
      'databases[0].checkpoint.truncatePages: must be greater than passivePages (1000)',
    ]);
    expect(withCheckpoint('{ colour: red, holdLock: 1 }')).toEqual([
      'databases[0].checkpoint.colour: unknown setting (known: passivePages, truncatePages, holdLock)',
      'databases[0].checkpoint.holdLock: must be true or false, got number 1',
    ]);
    expect(withCheckpoint('5')).toEqual([
      'databases[0].checkpoint: must be a mapping, got number 5',
    ]);
  });
});
