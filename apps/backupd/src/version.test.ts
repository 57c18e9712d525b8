import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { STORE_URL_HELP } from './cli/store-url-help.ts';
import { singleDatabaseConfig } from './config.ts';
import { MAIN_HELP, main } from './main.ts';
import { Redactor } from './redact.ts';
import { announceBackups } from './replicate/start.ts';
import { VERSION } from './version.ts';

const PACKAGE = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

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

describe('the version', () => {
  it('is the version in apps/backupd/package.json', () => {
    expect(PACKAGE.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(VERSION).toBe(PACKAGE.version);
  });

  it('is what --version, the main help and the replicate banner print', async () => {
    const stdout = sink();
    expect(await main(['--version'], { stdout: stdout.stream, env: {} })).toBe(0);
    expect(stdout.text()).toBe(`backupd ${PACKAGE.version}\n`);
    expect(MAIN_HELP.split('\n')[0]).toBe(
      `backupd ${PACKAGE.version} — continuous, fenced backup of a database's WAL to object storage`,
    );
    expect(MAIN_HELP.endsWith(STORE_URL_HELP)).toBe(true);
    const banner = sink();
    const config = singleDatabaseConfig(
      { path: '/srv/app.db', url: 's3://backups/app' },
      { env: {}, baseDir: '/' },
    );
    announceBackups(config, { stdout: banner.stream, redactor: new Redactor([]) });
    expect(banner.text()).toBe(
      `backupd ${PACKAGE.version}: backing up /srv/app.db (sqlite) to s3://backups/app\n`,
    );
  });

  it('is what the installed command prints (bin/backupd.js, from the sources)', () => {
    const result = spawnSync(
      process.execPath,
      [fileURLToPath(new URL('../bin/backupd.js', import.meta.url)), '--version'],
      { encoding: 'utf8' },
    );
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe(`backupd ${PACKAGE.version}\n`);
  });
});
