/**
 * What a test file of this package owns: temporary directories and child
 * processes, released after each test (the children killed, then the
 * directories removed). Call once at the top of the file.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';

export function testWorkspace(): {
  directory(label: string): string;
  readonly children: ChildProcess[];
} {
  const directories: string[] = [];
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill('SIGKILL');
    for (const directory of directories.splice(0))
      rmSync(directory, { recursive: true, force: true });
  });
  return {
    directory(label) {
      const directory = mkdtempSync(join(tmpdir(), label));
      directories.push(directory);
      return directory;
    },
    children,
  };
}
