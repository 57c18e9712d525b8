/**
 * Every default and bound has one home: the package that owns it, or
 * config.ts's DEFAULTS and BOUNDS; config validation uses them, the
 * environment variables are derived from the YAML keys, and the README's
 * table says the same.
 */
import { readFileSync } from 'node:fs';
import {
  DEFAULT_COMPACTION_LEVELS_MS,
  DEFAULT_EXACT_WINDOW_MS,
  DEFAULT_MANIFEST_INTERVAL_MS,
  DEFAULT_RETAIN_FOR_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  DEFAULT_WAL_INTERVAL_MS,
} from '@x/backup-worker';
import { DEFAULT_TTL_S, MAX_SANE_TTL_S, MIN_TTL_S } from '@x/lease';
import {
  DEFAULT_PASSIVE_CHECKPOINT_PAGES,
  DEFAULT_TRUNCATE_CHECKPOINT_PAGES,
} from '@x/source-sqlite';
import { describe, expect, it } from 'vitest';
import {
  BOUNDS,
  ConfigError,
  DATABASE_SETTINGS,
  DEFAULTS,
  environmentVariable,
  parseConfig,
  singleDatabaseConfig,
} from './config.ts';
import { formatDuration } from './duration.ts';

const yaml = (setting: string) =>
  `databases:\n  - path: /srv/app.db\n    url: file:///backups/app\n    ${setting}\n`;

function problems(text: string): readonly string[] {
  try {
    parseConfig(text, { env: {}, baseDir: '/' });
    return [];
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
}

describe('defaults and bounds', () => {
  it('take what the packages own from them', () => {
    expect(DEFAULTS.leaseTtlSeconds).toBe(DEFAULT_TTL_S);
    expect(BOUNDS.leaseTtlSeconds).toEqual({ min: MIN_TTL_S, max: MAX_SANE_TTL_S });
    expect(DEFAULTS.checkpoint).toEqual({
      passivePages: DEFAULT_PASSIVE_CHECKPOINT_PAGES,
      truncatePages: DEFAULT_TRUNCATE_CHECKPOINT_PAGES,
      holdLock: true,
    });
    expect(DEFAULTS).toMatchObject({
      intervalMs: DEFAULT_WAL_INTERVAL_MS,
      restorePointIntervalMs: DEFAULT_MANIFEST_INTERVAL_MS,
      retention: { windowMs: DEFAULT_RETAIN_FOR_MS },
      shutdownGraceMs: DEFAULT_SHUTDOWN_GRACE_MS,
      compactionLevelsMs: DEFAULT_COMPACTION_LEVELS_MS,
      exactWindowMs: DEFAULT_EXACT_WINDOW_MS,
    });
  });

  it('are what a config without settings gets', () => {
    const [database] = parseConfig(yaml(''), { env: {}, baseDir: '/' }).databases;
    expect(database).toMatchObject({
      intervalMs: DEFAULTS.intervalMs,
      restorePointIntervalMs: DEFAULTS.restorePointIntervalMs,
      retention: DEFAULTS.retention,
      leaseTtlSeconds: DEFAULTS.leaseTtlSeconds,
      shutdownGraceMs: DEFAULTS.shutdownGraceMs,
      compactionLevelsMs: DEFAULTS.compactionLevelsMs,
      exactWindowMs: DEFAULTS.exactWindowMs,
      checkpoint: DEFAULTS.checkpoint,
      conditional: DEFAULTS.conditional,
    });
  });

  it('bound the lease TTL by @x/lease: its shortest TTL and the longest it trusts', () => {
    expect(problems(yaml(`leaseTtl: ${MIN_TTL_S}s`))).toEqual([]);
    expect(problems(yaml(`leaseTtl: ${MAX_SANE_TTL_S}s`))).toEqual([]);
    expect(problems(yaml(`leaseTtl: ${MIN_TTL_S * 1000 - 1}ms`))).toEqual([
      `databases[0].leaseTtl: must be at least ${MIN_TTL_S * 1000}ms`,
    ]);
    expect(problems(yaml(`leaseTtl: ${MAX_SANE_TTL_S + 1}s`))).toEqual([
      `databases[0].leaseTtl: must be at most ${formatDuration(MAX_SANE_TTL_S * 1000)}`,
    ]);
  });

  it('bound the other settings by BOUNDS', () => {
    expect(problems(yaml(`interval: ${BOUNDS.intervalMs.min}ms`))).toEqual([]);
    expect(problems(yaml(`interval: ${BOUNDS.intervalMs.min - 1}ms`))).toEqual([
      `databases[0].interval: must be at least ${BOUNDS.intervalMs.min}ms`,
    ]);
    expect(
      problems(yaml(`restorePointInterval: ${BOUNDS.restorePointIntervalMs.min - 1}ms`)),
    ).toHaveLength(1);
    const { minCount, minWindowMs, maxWindowMs } = BOUNDS.retention;
    expect(problems(yaml(`retention: ${minCount}`))).toEqual([]);
    expect(problems(yaml(`retention: ${minCount - 1}`))).toEqual([
      `databases[0].retention: must be a window such as "24h", "7d" or "90m" (${formatDuration(minWindowMs)} to ${maxWindowMs / 86_400_000}d) or a count of restore points (a whole number, at least ${minCount}), got number ${minCount - 1}`,
    ]);
    expect(problems(yaml(`retention: ${minWindowMs}ms`))).toEqual([]);
    expect(problems(yaml(`retention: ${minWindowMs - 1}ms`))).toHaveLength(1);
    expect(problems(yaml(`retention: ${maxWindowMs / 3_600_000}h`))).toEqual([]);
    expect(problems(yaml(`retention: ${maxWindowMs / 3_600_000 + 1}h`))).toHaveLength(1);
  });
});

describe('the environment variables', () => {
  it('are BACKUPD_ and the YAML key in capitals', () => {
    expect(DATABASE_SETTINGS.map((setting) => environmentVariable(setting.key))).toEqual([
      'BACKUPD_INTERVAL',
      'BACKUPD_RESTORE_POINT_INTERVAL',
      'BACKUPD_RETENTION',
      'BACKUPD_LEASE_TTL',
      'BACKUPD_SHUTDOWN_GRACE',
      'BACKUPD_SNAPSHOT_INTERVAL',
      'BACKUPD_SNAPSHOT_LOG_FACTOR',
      'BACKUPD_COMPACTION',
      'BACKUPD_EXACT_WINDOW',
      'BACKUPD_CHECKPOINT_PASSIVE_PAGES',
      'BACKUPD_CHECKPOINT_TRUNCATE_PAGES',
      'BACKUPD_CHECKPOINT_HOLD_LOCK',
      'BACKUPD_CONDITIONAL',
    ]);
    expect(environmentVariable('cpuPriority')).toBe('BACKUPD_CPU_PRIORITY');
  });

  it('each set the field of its key', () => {
    const env = {
      BACKUPD_INTERVAL: '2s',
      BACKUPD_RESTORE_POINT_INTERVAL: '20s',
      BACKUPD_RETENTION: '5d',
      BACKUPD_LEASE_TTL: '45s',
      BACKUPD_SHUTDOWN_GRACE: '3s',
      BACKUPD_COMPACTION: '1m,1h',
      BACKUPD_EXACT_WINDOW: '10m',
      BACKUPD_CHECKPOINT_PASSIVE_PAGES: '200',
      BACKUPD_CHECKPOINT_TRUNCATE_PAGES: '400',
      BACKUPD_CHECKPOINT_HOLD_LOCK: 'off',
      BACKUPD_CONDITIONAL: 'off',
    };
    const [database] = singleDatabaseConfig(
      { path: '/srv/app.db', url: 'file:///backups/app' },
      { env, baseDir: '/' },
    ).databases;
    expect(database).toMatchObject({
      intervalMs: 2000,
      restorePointIntervalMs: 20_000,
      retention: { windowMs: 5 * 86_400_000 },
      leaseTtlSeconds: 45,
      shutdownGraceMs: 3000,
      compactionLevelsMs: [60_000, 3_600_000],
      exactWindowMs: 600_000,
      checkpoint: { passivePages: 200, truncatePages: 400, holdLock: false },
      conditional: false,
    });
  });
});

describe('the README table of settings', () => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const rows = readme
    .split('### Settings, from the YAML key down')[1]!
    .split('\n\n')
    .find((block) => block.startsWith('| YAML key'))!
    .split('\n')
    .slice(2)
    .map((line) =>
      line
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );

  it('has one row per database setting, naming its variable, field and worker option', () => {
    for (const setting of DATABASE_SETTINGS) {
      const row = rows.find((cells) => cells[0] === `\`${setting.key}\``);
      expect(row, setting.key).toBeDefined();
      const [, variable, , field, option] = row!;
      expect(variable).toContain(`\`${environmentVariable(setting.key)}\``);
      expect(field).toBe(`\`${setting.field}\``);
      // Several names: the value's form chooses (`retention`: a window or a count).
      const { owner, options } = setting.workerOption;
      expect(options.length, setting.key).toBeGreaterThan(0);
      expect(option).toBe(`\`${owner}\` ${options.map((name) => `\`${name}\``).join(' or ')}`);
    }
  });

  it('gives each duration default as DEFAULTS has it', () => {
    const durations: [string, number][] = [
      ['interval', DEFAULTS.intervalMs],
      ['restorePointInterval', DEFAULTS.restorePointIntervalMs],
      ['leaseTtl', DEFAULTS.leaseTtlSeconds * 1000],
      ['shutdownGrace', DEFAULTS.shutdownGraceMs],
      ['exactWindow', DEFAULTS.exactWindowMs],
    ];
    for (const [key, milliseconds] of durations) {
      const row = rows.find((cells) => cells[0] === `\`${key}\``)!;
      expect(row[5], key).toMatch(new RegExp(`^\`${formatDuration(milliseconds)}\``));
    }
    // The default retention is a window: written as a duration.
    expect('windowMs' in DEFAULTS.retention).toBe(true);
    const { windowMs } = DEFAULTS.retention as { windowMs: number };
    expect(rows.find((cells) => cells[0] === '`retention`')![5]).toBe(
      `\`${formatDuration(windowMs)}\``,
    );
  });
});
