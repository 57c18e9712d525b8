/**
 * The command names the Node.js it needs instead of failing inside a module
 * it cannot load (Node 20 used to print a SyntaxError about `registerHooks`).
 * The version the command sees is replaced before it starts, so the test
 * does not depend on which old Node a machine has.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/backupd.js', import.meta.url));

function runAs(version: string, env: NodeJS.ProcessEnv = {}) {
  const pretend = `data:text/javascript,Object.defineProperty(process.versions,"node",{value:"${version}"})`;
  return spawnSync(process.execPath, ['--import', pretend, BIN, '--version'], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
  });
}

describe('the Node.js version the command needs', () => {
  it.each(['20.20.2', '22.15.1'])('refuses Node %s, naming the version it needs', (version) => {
    const result = runAs(version);
    expect(result.status).toBe(1);
    expect(result.stderr).toBe(
      `backupd: needs Node.js 22.16 or newer; this is v${version} (${process.execPath})\n`,
    );
    expect(result.stdout).toBe('');
  });

  it('refuses to run the TypeScript sources on a Node that cannot strip types', () => {
    const result = runAs('22.16.0', { BACKUPD_FROM_SOURCES: '1' });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      'running from the TypeScript sources needs Node.js 22.18 or newer; this is v22.16.0',
    );
  });

  it('runs on this Node', () => {
    const result = spawnSync(process.execPath, [BIN, '--version'], { encoding: 'utf8' });
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^backupd \d+\.\d+\.\d+/);
  });
});
