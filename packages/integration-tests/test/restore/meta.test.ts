/**
 * Meta-tests: the helpers the restore suites assert with can fail. A
 * "target unchanged" check built on a tree snapshot that missed changes, or
 * a fixture whose expected bytes did not depend on the commit, would let a
 * broken restore pass.
 */
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { MemoryStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { snapshotTree, writeFixture } from './fixture.ts';
import { scratchDirectory } from './stores.ts';

describe('the suites’ own helpers', () => {
  let scratch: { path: string; cleanup(): Promise<void> };
  beforeEach(async () => {
    scratch = await scratchDirectory();
  });
  afterEach(async () => {
    await scratch.cleanup();
  });

  it('snapshotTree sees every kind of change a restore could make', async () => {
    const root = join(scratch.path, 'tree');
    expect(await snapshotTree(root)).toEqual(new Map([['.', 'absent']]));
    await mkdir(root);
    let previous = await snapshotTree(root);
    const changes: (() => Promise<void>)[] = [
      () => writeFile(join(root, 'a'), 'one'),
      () => writeFile(join(root, 'a'), 'two'),
      () => mkdir(join(root, '.hidden')),
      () => writeFile(join(root, '.hidden', 'b'), ''),
      () => symlink('/tmp', join(root, 'link')),
    ];
    for (const change of changes) {
      await change();
      const next = await snapshotTree(root);
      expect(next).not.toEqual(previous);
      previous = next;
    }
  });

  it('the fixture’s expected files differ between commits, and its WAL grows by one frame per commit', async () => {
    const fixture = await writeFixture(new MemoryStore(), 'backups/meta');
    const commits = fixture.restorableCommits;
    for (let index = 1; index < commits.length; index += 1) {
      const before = fixture.expectedFiles(commits[index - 1]!);
      const after = fixture.expectedFiles(commits[index]!);
      expect(after).not.toEqual(before);
    }
    const wal = (commit: number): number =>
      fixture.expectedFiles(commit).get('wal.bin')!.byteLength;
    expect(wal(5)).toBe(0);
    expect(wal(6)).toBeGreaterThan(0);
    expect(wal(9)).toBeGreaterThan(wal(8));
  });
});
