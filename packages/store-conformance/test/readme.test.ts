/**
 * The README speaks to users of the published package: it never sends them
 * to the repository's private test servers. (Its ts/js blocks are checked by
 * tools/test/readme-examples.test.ts; the suites among them run in
 * examples.test.ts.)
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

describe('README', () => {
  it('does not name the private @x/test-servers', async () => {
    const readme = await readFile(join(PACKAGE_ROOT, 'README.md'), 'utf8');
    expect(readme).not.toMatch(/@x\/test-servers/);
  });
});
