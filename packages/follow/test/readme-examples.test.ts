/**
 * The README's example runs with node and prints what it should (that the
 * README shows it verbatim is checked by tools/test/readme-examples.test.ts).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

describe('README examples', () => {
  it('examples/follow.mjs follows a backup and leaves the replica as restored', () => {
    const run = spawnSync(process.execPath, ['--conditions=@x/source', 'examples/follow.mjs'], {
      cwd: PACKAGE_ROOT,
      encoding: 'utf8',
    });
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe(
      'replica: 0 notes (first state)\nreplica: 1 notes (newer state)\nreplica: 2 notes (newer state)\njournal mode byte: 2\n',
    );
  });
});
