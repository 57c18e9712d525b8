import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { UsageError } from '../cli/usage-error.ts';
import { ConfigError } from '../config.ts';
import { defaultBackupUrl, loadReplicateConfig } from './config-arguments.ts';

const scratch = mkdtempSync(join(tmpdir(), 'backupd-replicate-arguments-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const base = { cwd: scratch, env: {} };

describe('loadReplicateConfig', () => {
  it('backs up <db> to a directory beside it without a URL, relative to the working directory', () => {
    const config = loadReplicateConfig({ ...base, positionals: ['app.db'] });
    expect(config.databases).toHaveLength(1);
    expect(config.databases[0]!.path).toBe(join(scratch, 'app.db'));
    expect(config.databases[0]!.urls.map((url) => url.text)).toEqual([
      defaultBackupUrl(join(scratch, 'app.db')),
    ]);
    expect(defaultBackupUrl('/srv/app.db')).toBe('file:///srv/app.db-backups');
  });

  it('takes --type and --listen, and the environment’s settings', () => {
    const config = loadReplicateConfig({
      ...base,
      env: { BACKUPD_RETENTION: '5' },
      positionals: ['store', 'file:///backups/store'],
      type: 'framed',
      listen: '127.0.0.1:9090',
    });
    expect(config.listen).toBe('127.0.0.1:9090');
    expect(config.databases[0]).toMatchObject({ type: 'framed', retention: { count: 5 } });
  });

  it('reads -c relative to the working directory, with --listen over the file’s', () => {
    writeFileSync(
      join(scratch, 'backupd.yml'),
      'listen: 127.0.0.1:1\ndatabases:\n  - path: app.db\n    url: file:///backups/app\n',
    );
    const fromFile = loadReplicateConfig({ ...base, positionals: [], config: 'backupd.yml' });
    expect(fromFile.listen).toBe('127.0.0.1:1');
    expect(fromFile.databases[0]!.path).toBe(join(scratch, 'app.db'));
    const overridden = loadReplicateConfig({
      ...base,
      positionals: [],
      config: 'backupd.yml',
      listen: '127.0.0.1:2',
    });
    expect(overridden.listen).toBe('127.0.0.1:2');
  });

  it('refuses contradicting or missing arguments as usage errors, naming the fix', () => {
    const refusal = (args: Parameters<typeof loadReplicateConfig>[0]) => {
      try {
        loadReplicateConfig(args);
      } catch (error) {
        return error;
      }
      throw new Error('accepted');
    };
    const both = refusal({ ...base, positionals: ['app.db'], config: 'backupd.yml' });
    expect(both).toBeInstanceOf(UsageError);
    expect(both).toHaveProperty('message', 'give either -c <config> or <db> [<url>], not both');
    expect(refusal({ ...base, positionals: [] })).toHaveProperty(
      'message',
      'missing <db> (or -c <config>)',
    );
    expect(refusal({ ...base, positionals: ['a.db', 'file:///b', 'c'] })).toHaveProperty(
      'message',
      'unexpected argument "c"',
    );
    const unreadable = refusal({ ...base, positionals: [], config: 'absent.yml' });
    expect(unreadable).toBeInstanceOf(UsageError);
    expect(unreadable).toHaveProperty(
      'message',
      `cannot read the config file ${join(scratch, 'absent.yml')}: ENOENT`,
    );
    expect(
      refusal({ ...base, env: { BACKUPD_LEASE_TTL: '1s' }, positionals: ['a.db'] }),
    ).toBeInstanceOf(ConfigError);
  });
});
