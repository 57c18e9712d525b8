import { mkdirSync } from 'node:fs';
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RestoreMaterializer } from '@x/engine';
import { crc32Hex, manifestKey, serializeManifest } from '@x/manifest';
import {
  NoRestorePointError,
  ObjectCorruptError,
  ObjectMissingError,
  planRestore,
  RestoreIncompleteError,
  type RestoreOptions,
  RestoreOptionsError,
  RestorePointRejectedError,
  type RestoreProgress,
  type RestoreTarget,
  RestoreTargetNotEmptyError,
  RestoreTargetUnsafeError,
  restore,
} from '@x/restore';
import { framedStoreMaterializer, restoreFramedStore } from '@x/source-framed';
import { MemoryStore, type ObjectStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Fixture, readFiles, seededRandom, snapshotTree, writeFixture } from './fixture.ts';
import { localStores, scratchDirectory } from './stores.ts';

const PREFIX = 'backups/db1';

function parentOf(fixture: Fixture, key: string, commitSeq: number): string {
  return `${JSON.stringify({ lineage: fixture.lineage, manifestKey: key, commitSeq })}\n`;
}

function expectFilesEqual(
  actual: Map<string, Uint8Array>,
  expected: Map<string, Uint8Array>,
): void {
  expect([...actual.keys()].sort()).toEqual([...expected.keys()].sort());
  for (const [name, bytes] of expected) {
    expect(Buffer.from(actual.get(name)!).equals(Buffer.from(bytes)), `${name} differs`).toBe(true);
  }
}

for (const storeCase of localStores) {
  describe(`restore on ${storeCase.name}`, () => {
    let store: ObjectStore;
    let cleanupStore: () => Promise<void>;
    let scratch: { path: string; cleanup(): Promise<void> };
    let fixture: Fixture;

    beforeEach(async () => {
      ({ store, cleanup: cleanupStore } = await storeCase.create());
      scratch = await scratchDirectory();
      fixture = await writeFixture(store, PREFIX);
    });
    afterEach(async () => {
      await scratch.cleanup();
      await cleanupStore();
    });

    it('restores LATEST into a new directory, byte for byte, with the parent record and without backup.lineage', async () => {
      const target = join(scratch.path, 'restored');
      const result = await restoreFramedStore(store, PREFIX, target);
      const latest = fixture.manifests[fixture.manifests.length - 1]!;
      expect(result.manifestKey).toBe(fixture.latestKey);
      expect(result.commitSeq).toBe(latest.manifest.commitSeq);
      expect(result.lineage).toBe(fixture.lineage);
      const files = await readFiles(target);
      const expected = fixture.expectedFiles(latest.manifest.commitSeq);
      expected.set(
        'backup.parent',
        new TextEncoder().encode(parentOf(fixture, fixture.latestKey, latest.manifest.commitSeq)),
      );
      expectFilesEqual(files, expected);
      expect(files.has('backup.lineage')).toBe(false);
      // Nothing but the files: no staging directory left behind.
      expect([...(await snapshotTree(target)).keys()].sort()).toEqual(
        ['.', ...expected.keys()].sort(),
      );
      expect(result.files.at(-1)).toBe('backup.parent');
    });

    it('restores every covered commit exactly, cutting the WAL after its frame', async () => {
      const random = seededRandom(7);
      const commits = new Set<number>([
        fixture.restorableCommits[0]!,
        fixture.restorableCommits.at(-1)!,
        14, // covered by two generations: the one with fewer commits wins
        15,
      ]);
      while (commits.size < 10) {
        commits.add(
          fixture.restorableCommits[Math.floor(random() * fixture.restorableCommits.length)]!,
        );
      }
      for (const commitSeq of commits) {
        const target = join(scratch.path, `commit-${commitSeq}`);
        const result = await restoreFramedStore(store, PREFIX, target, {
          target: { kind: 'commit', commitSeq },
        });
        expect(result.commitSeq).toBe(commitSeq);
        const expected = fixture.expectedFiles(commitSeq);
        const covering = fixture.manifests.find(
          (entry) => entry.generation.base <= commitSeq && commitSeq <= entry.manifest.commitSeq,
        )!;
        expect(result.manifestKey).toBe(covering.key);
        expected.set(
          'backup.parent',
          new TextEncoder().encode(parentOf(fixture, covering.key, commitSeq)),
        );
        expectFilesEqual(await readFiles(target), expected);
      }
    });

    it('restores a named manifest, and a commit within it', async () => {
      const first = fixture.manifests[0]!;
      const whole = await restoreFramedStore(store, PREFIX, join(scratch.path, 'a'), {
        target: { kind: 'restore-point', manifestKey: first.key },
      });
      expect(whole.commitSeq).toBe(first.manifest.commitSeq);
      const expected = fixture.expectedFiles(first.manifest.commitSeq);
      const files = await readFiles(join(scratch.path, 'a'));
      files.delete('backup.parent');
      expectFilesEqual(files, expected);

      const cut = await restoreFramedStore(store, PREFIX, join(scratch.path, 'b'), {
        target: { kind: 'restore-point', manifestKey: fixture.manifests[1]!.key, commitSeq: 6 },
      });
      expect(cut.commitSeq).toBe(6);
      const cutFiles = await readFiles(join(scratch.path, 'b'));
      cutFiles.delete('backup.parent');
      expectFilesEqual(cutFiles, fixture.expectedFiles(6));
    });

    it('refuses a commit no restore point covers, naming the nearest ones', async () => {
      const beyond = fixture.restorableCommits.at(-1)! + 1;
      const target = join(scratch.path, 'none');
      const error = await restoreFramedStore(store, PREFIX, target, {
        target: { kind: 'commit', commitSeq: beyond },
      }).catch((e: unknown) => e);
      expect(NoRestorePointError.isInstance(error)).toBe(true);
      const refusal = error as NoRestorePointError;
      expect(refusal.requestedCommitSeq).toBe(beyond);
      expect(refusal.nearestBelow).toBe(beyond - 1);
      expect(refusal.nearestAbove).toBeUndefined();
      expect(refusal.available.map((range) => [range.from, range.to])).toEqual([
        [5, 9],
        [5, 14],
        [14, 17],
        [14, 21],
      ]);
      // Below the floor: the nearest is above.
      const below = (await restoreFramedStore(store, PREFIX, target, {
        target: { kind: 'commit', commitSeq: 2 },
      }).catch((e: unknown) => e)) as NoRestorePointError;
      expect(below.nearestAbove).toBe(5);
      expect(below.nearestBelow).toBeUndefined();
      expect(below.message).toContain('nearest above: 5');
      // A named manifest that does not reach the commit.
      const outside = await restoreFramedStore(store, PREFIX, target, {
        target: { kind: 'restore-point', manifestKey: fixture.manifests[0]!.key, commitSeq: 12 },
      }).catch((e: unknown) => e);
      expect(NoRestorePointError.isInstance(outside)).toBe(true);
      expect(await snapshotTree(target)).toEqual(new Map([['.', 'absent']]));
    });

    it('refuses an empty prefix with NoRestorePointError', async () => {
      const error = await restoreFramedStore(store, 'backups/empty', join(scratch.path, 'x')).catch(
        (e: unknown) => e,
      );
      expect(NoRestorePointError.isInstance(error)).toBe(true);
      expect((error as Error).message).toContain('backups/empty/LATEST does not exist');
    });

    describe('corrupt or missing objects are refused before anything reaches the target', () => {
      const corruptions: {
        what: string;
        pick: (fixture: Fixture) => string;
        property: 'size' | 'crc32';
      }[] = [
        {
          what: 'a snapshot with a flipped byte',
          pick: (f) => keyOf(f, 'snapshots/00000000000000000001'),
          property: 'crc32',
        },
        { what: 'an archive one byte short', pick: (f) => keyOf(f, 'archives/'), property: 'size' },
        {
          what: 'a side file with a flipped byte',
          pick: (f) => keyOf(f, 'side/roles.json/'),
          property: 'crc32',
        },
        {
          what: 'the last segment with a flipped byte',
          pick: (f) => lastSegmentKey(f),
          property: 'crc32',
        },
        {
          what: 'the last segment one byte longer',
          pick: (f) => lastSegmentKey(f),
          property: 'size',
        },
      ];
      for (const corruption of corruptions) {
        it(`${corruption.what}: ObjectCorruptError naming key, expected and actual`, async () => {
          const key = corruption.pick(fixture);
          const original = fixture.objects.get(key)!;
          const damaged =
            corruption.property === 'crc32'
              ? flipByte(original)
              : corruption.what.includes('short')
                ? original.slice(0, -1)
                : Buffer.concat([original, new Uint8Array([7])]);
          await store.put(key, damaged, { mode: 'overwrite' });

          for (const setup of ['missing', 'empty', 'forced'] as const) {
            const target = join(scratch.path, `target-${setup}`);
            if (setup !== 'missing') await mkdir(target);
            if (setup === 'forced') {
              await writeFile(join(target, 'snapshot.bin'), 'old snapshot');
              await writeFile(join(target, 'wal.bin'), 'old wal');
              await writeFile(join(target, 'backup.lineage'), 'old lineage');
            }
            const before = await snapshotTree(target);
            const error = await restoreFramedStore(store, PREFIX, target, {
              force: setup === 'forced',
            }).catch((e: unknown) => e);
            expect(ObjectCorruptError.isInstance(error), String(error)).toBe(true);
            const refusal = error as ObjectCorruptError;
            expect(refusal.key).toBe(key);
            expect(refusal.property).toBe(corruption.property);
            if (corruption.property === 'crc32') {
              expect(refusal.expected).toBe(crc32Hex(original));
              expect(refusal.actual).toBe(crc32Hex(damaged));
            } else {
              expect(refusal.expected).toBe(String(original.byteLength));
              expect(refusal.actual).toBe(String(damaged.byteLength));
            }
            expect(await snapshotTree(target)).toEqual(before);
          }
        });
      }

      it('a missing object: ObjectMissingError, target unchanged', async () => {
        const key = keyOf(fixture, 'side/commit_times.bin/');
        await store.delete(key);
        const target = join(scratch.path, 'target');
        await mkdir(target);
        const before = await snapshotTree(target);
        const error = await restoreFramedStore(store, PREFIX, target).catch((e: unknown) => e);
        expect(ObjectMissingError.isInstance(error)).toBe(true);
        expect((error as ObjectMissingError).key).toBe(key);
        expect((error as ObjectMissingError).manifestKey).toBe(fixture.latestKey);
        expect(await snapshotTree(target)).toEqual(before);
      });

      it('a corrupt segment past the cut point is still refused (every byte of a used segment is checked)', async () => {
        // Commit 18 needs the last segment's first frame only.
        const key = lastSegmentKey(fixture);
        const original = fixture.objects.get(key)!;
        const damaged = original.slice();
        damaged[damaged.byteLength - 1]! ^= 0xff;
        await store.put(key, damaged, { mode: 'overwrite' });
        const error = await restoreFramedStore(store, PREFIX, join(scratch.path, 't'), {
          target: { kind: 'commit', commitSeq: 18 },
        }).catch((e: unknown) => e);
        expect(ObjectCorruptError.isInstance(error)).toBe(true);
        // A commit that does not need that segment restores.
        const fine = await restoreFramedStore(store, PREFIX, join(scratch.path, 'u'), {
          target: { kind: 'commit', commitSeq: 16 },
        });
        expect(fine.manifestKey).toBe(manifestKey(PREFIX, 17));
      });
    });

    describe('hostile manifests are refused and nothing is written anywhere', () => {
      const hostile: {
        what: string;
        edit: (manifest: Record<string, unknown>, fixture: Fixture) => void;
        /** Set when restore's own checks (not the manifest parser) must be what refuses. */
        problem?: string;
      }[] = [
        { what: 'a file name with ..', edit: (m) => renameFile(m, '../escape') },
        { what: 'an absolute file name', edit: (m) => renameFile(m, '/tmp/escape') },
        { what: 'a file name with a separator', edit: (m) => renameFile(m, 'sub/escape') },
        { what: 'the file name ..', edit: (m) => renameFile(m, '..') },
        {
          what: 'a hidden file name',
          edit: (m) => renameFile(m, '.restore-staging-x'),
          problem: 'starts with "."',
        },
        {
          what: 'a file named wal.bin',
          edit: (m) => renameFile(m, 'wal.bin'),
          problem: 'never carries',
        },
        {
          what: 'a file named snapshot.intent',
          edit: (m) => renameFile(m, 'snapshot.intent'),
          problem: 'never carries',
        },
        {
          what: 'a file named backup.parent',
          edit: (m) => renameFile(m, 'backup.parent'),
          problem: 'never carries',
        },
        {
          what: 'a key outside the prefix',
          edit: (m) => {
            const files = m.files as Record<string, unknown>[];
            files[0]!.key =
              'backups/other/snapshots/00000000000000000001-00000000000000000014.snapshot';
          },
        },
        {
          what: 'a segment of another generation',
          edit: (m, f) => {
            const segments = m.segments as Record<string, unknown>[];
            segments[0]!.key = f.manifests[0]!.manifest.segments[0]!.key;
          },
        },
        {
          what: 'segments that do not chain',
          edit: (m) => {
            const segments = m.segments as Record<string, unknown>[];
            segments.splice(0, 1);
            m.commitSeq = (m.commitSeq as number) - 3;
          },
        },
        {
          what: 'an entry of another lineage',
          edit: (m) => {
            const files = m.files as Record<string, unknown>[];
            files[1]!.lineage = 'b'.repeat(32);
          },
        },
      ];
      for (const attack of hostile) {
        it(attack.what, async () => {
          const latest = fixture.manifests.at(-1)!;
          const edited = JSON.parse(serializeManifest(latest.manifest)) as Record<string, unknown>;
          attack.edit(edited, fixture);
          await store.put(latest.key, new TextEncoder().encode(JSON.stringify(edited)), {
            mode: 'overwrite',
          });
          const target = join(scratch.path, 'target');
          const before = await snapshotTree(scratch.path);
          // Named: a restore of the latest state would fall back to an older point.
          const error = await restoreFramedStore(store, PREFIX, target, {
            target: { kind: 'restore-point', manifestKey: latest.key },
          }).catch((e: unknown) => e);
          expect(RestorePointRejectedError.isInstance(error), String(error)).toBe(true);
          expect((error as RestorePointRejectedError).key).toBe(latest.key);
          if (attack.problem !== undefined) {
            expect((error as RestorePointRejectedError).problems.join('; ')).toContain(
              attack.problem,
            );
            expect((error as RestorePointRejectedError).problems.join('; ')).not.toContain(
              'does not parse',
            );
          }
          // Neither the target nor anything beside it was created.
          expect(await snapshotTree(scratch.path)).toEqual(before);
        });
      }

      it('LATEST naming a key outside the prefix is not followed (the newest restore point is used, and said so)', async () => {
        await store.put(
          `${PREFIX}/LATEST`,
          new TextEncoder().encode('backups/other/manifest/00000000000000000021.json'),
          {
            mode: 'overwrite',
          },
        );
        const result = await restoreFramedStore(store, PREFIX, join(scratch.path, 't'));
        expect(result.manifestKey).toBe(fixture.latestKey);
        expect(result.fellBackFrom?.latest).toBeNull();
        expect(result.fellBackFrom?.reason).toContain('does not hold one manifest key');
      });

      it('a manifest key option outside the prefix', async () => {
        const error = await restoreFramedStore(store, PREFIX, join(scratch.path, 't'), {
          target: {
            kind: 'restore-point',
            manifestKey: 'backups/other/manifest/00000000000000000021.json',
          },
        }).catch((e: unknown) => e);
        expect((error as Error).name).toBe('RestoreOptionsError');
      });
    });

    describe('the target', () => {
      it('a non-empty target is refused unless forced', async () => {
        const target = join(scratch.path, 'busy');
        await mkdir(target);
        await writeFile(join(target, 'notes.txt'), 'keep me');
        const before = await snapshotTree(target);
        const error = await restoreFramedStore(store, PREFIX, target).catch((e: unknown) => e);
        expect(RestoreTargetNotEmptyError.isInstance(error)).toBe(true);
        expect((error as RestoreTargetNotEmptyError).entries).toEqual(['notes.txt']);
        expect(await snapshotTree(target)).toEqual(before);
      });

      it('a forced restore replaces the store files, removes stale ones it owns, keeps others', async () => {
        const target = join(scratch.path, 'busy');
        await mkdir(target);
        for (const [name, text] of [
          ['notes.txt', 'keep me'],
          ['snapshot.bin', 'old'],
          ['wal.bin', 'old'],
          ['wal.9.archive', 'stale archive'],
          ['snapshot.intent', 'stale intent'],
          ['backup.lineage', 'old lineage'],
          ['backup.parent', '{"old":true}'],
          ['keys.json', 'stale keys'],
        ] as const) {
          await writeFile(join(target, name), text);
        }
        await mkdir(join(target, '.restore-staging-leftover'));
        await writeFile(join(target, '.restore-staging-leftover', 'wal.bin'), 'half');
        await restoreFramedStore(store, PREFIX, target, { force: true });
        const files = await readFiles(target);
        const expected = fixture.expectedFiles(21);
        expected.set(
          'backup.parent',
          new TextEncoder().encode(parentOf(fixture, fixture.latestKey, 21)),
        );
        expected.set('notes.txt', new TextEncoder().encode('keep me'));
        expectFilesEqual(files, expected);
        expect(
          [...(await snapshotTree(target)).keys()].filter((path) => path.startsWith('.restore')),
        ).toEqual([]);
      });

      it('a symbolic link in the target is refused, even when forced', async () => {
        const target = join(scratch.path, 'linked');
        await mkdir(target);
        await mkdir(join(scratch.path, 'elsewhere'));
        await symlink(
          join(scratch.path, 'elsewhere', 'snapshot.bin'),
          join(target, 'snapshot.bin'),
        );
        const before = await snapshotTree(scratch.path);
        const error = await restoreFramedStore(store, PREFIX, target, { force: true }).catch(
          (e: unknown) => e,
        );
        expect(RestoreTargetUnsafeError.isInstance(error)).toBe(true);
        expect(await snapshotTree(scratch.path)).toEqual(before);
      });

      it('a directory where a restored file goes is refused before anything moves, even when forced', async () => {
        const target = join(scratch.path, 'dir-in-the-way');
        await mkdir(join(target, 'wal.bin'), { recursive: true });
        await writeFile(join(target, 'snapshot.bin'), 'old');
        const before = await snapshotTree(target);
        const error = await restoreFramedStore(store, PREFIX, target, { force: true }).catch(
          (e: unknown) => e,
        );
        expect(RestoreTargetUnsafeError.isInstance(error)).toBe(true);
        expect((error as Error).message).toContain('wal.bin in it is a directory');
        expect(await snapshotTree(target)).toEqual(before);
      });

      it('a failure while files move into place is a RestoreIncompleteError; a forced restore then completes', async () => {
        const target = join(scratch.path, 'raced');
        const error = await restoreFramedStore(store, PREFIX, target, {
          onProgress: (progress) => {
            // Another writer creates a directory where the WAL goes, after the checks.
            if (progress.phase === 'commit') mkdirSync(join(target, 'wal.bin'));
          },
        }).catch((e: unknown) => e);
        expect(RestoreIncompleteError.isInstance(error)).toBe(true);
        expect((error as RestoreIncompleteError).targetDir).toBe(target);
        const files = await readFiles(target);
        expect(files.has('backup.parent')).toBe(false);
        expect(
          [...(await snapshotTree(target)).keys()].some((path) => path.startsWith('.restore')),
        ).toBe(false);
        await rm(join(target, 'wal.bin'), { recursive: true });
        const result = await restoreFramedStore(store, PREFIX, target, { force: true });
        const restored = await readFiles(target);
        restored.delete('backup.parent');
        expectFilesEqual(restored, fixture.expectedFiles(result.commitSeq));
      });

      it('a target that is a symbolic link or a file is refused', async () => {
        await mkdir(join(scratch.path, 'real'));
        await symlink(join(scratch.path, 'real'), join(scratch.path, 'link'));
        const linked = await restoreFramedStore(store, PREFIX, join(scratch.path, 'link')).catch(
          (e: unknown) => e,
        );
        expect(RestoreTargetUnsafeError.isInstance(linked)).toBe(true);
        await writeFile(join(scratch.path, 'file'), 'x');
        const file = await restoreFramedStore(store, PREFIX, join(scratch.path, 'file')).catch(
          (e: unknown) => e,
        );
        expect(RestoreTargetUnsafeError.isInstance(file)).toBe(true);
        expect(await readFiles(join(scratch.path, 'real'))).toEqual(new Map());
      });
    });

    it('reports progress: monotonic bytes up to the total, every object named', async () => {
      const events: RestoreProgress[] = [];
      const result = await restoreFramedStore(store, PREFIX, join(scratch.path, 'p'), {
        onProgress: (progress) => events.push(progress),
      });
      const downloads = events.filter((event) => event.phase === 'download');
      expect(events[0]!.phase).toBe('select');
      expect(events.at(-1)!.phase).toBe('done');
      const last = events.at(-1)!;
      expect(last.bytesDone).toBe(last.bytesTotal);
      expect(last.objectsDone).toBe(last.objectsTotal);
      expect(last.objectsTotal).toBe(result.objects);
      for (let index = 1; index < downloads.length; index += 1) {
        expect(downloads[index]!.bytesDone).toBeGreaterThanOrEqual(downloads[index - 1]!.bytesDone);
      }
      const latest = fixture.manifests.at(-1)!.manifest;
      const named = new Set(downloads.map((event) => event.key));
      for (const segment of latest.segments) expect(named.has(segment.key)).toBe(true);
      expect(downloads.some((event) => event.name === 'wal.bin')).toBe(true);
      expect(named.has(latest.files.find((file) => file.name === 'backup.lineage')!.key)).toBe(
        false,
      );
    });

    it('names the restore point it chose before downloading anything', async () => {
      const events: string[] = [];
      let chosen: { manifestKey: string; commitSeq: number } | undefined;
      const result = await restoreFramedStore(store, PREFIX, join(scratch.path, 'chosen'), {
        onChosen: (point) => {
          chosen = point;
          events.push('chosen');
        },
        onProgress: (progress) => {
          if (progress.objectsDone > 0) events.push('downloaded');
        },
      });
      expect(chosen).toEqual({ manifestKey: result.manifestKey, commitSeq: result.commitSeq });
      expect(events.filter((event) => event === 'chosen')).toHaveLength(1);
      expect(events.indexOf('chosen')).toBeLessThan(events.indexOf('downloaded'));
    });

    it('an aborted restore rejects with the abort reason and leaves the target as it was', async () => {
      const controller = new AbortController();
      const target = join(scratch.path, 'aborted');
      await mkdir(target);
      const error = await restoreFramedStore(store, PREFIX, target, {
        signal: controller.signal,
        onProgress: (progress) => {
          if (progress.phase === 'download' && progress.objectsDone === 2) controller.abort();
        },
      }).catch((e: unknown) => e);
      expect((error as Error).name).toBe('AbortError');
      expect(await snapshotTree(target)).toEqual(new Map([['.', 'dir']]));
    });

    it('a custom materializer decides names and may transform the staged files', async () => {
      const materializer: RestoreMaterializer = {
        ...framedStoreMaterializer,
        name: 'test-single-file',
        walFileName: 'log',
        targetName: (entry) => (entry.name === 'snapshot.bin' ? 'base' : null),
        async finish(staged) {
          const base = await readFile(join(staged.directory, 'base'));
          const log = await readFile(join(staged.directory, 'log'));
          await writeFile(join(staged.directory, 'database'), Buffer.concat([base, log]));
          return ['database'];
        },
        parentRecordName: 'origin.json',
      };
      const target = join(scratch.path, 'custom');
      const result = await restore(store, PREFIX, target, {
        materializer,
        target: { kind: 'commit', commitSeq: 20 },
      });
      const expected = fixture.expectedFiles(20);
      const files = await readFiles(target);
      expect([...files.keys()].sort()).toEqual(['database', 'origin.json']);
      expect(
        Buffer.from(files.get('database')!).equals(
          Buffer.concat([expected.get('snapshot.bin')!, expected.get('wal.bin')!]),
        ),
      ).toBe(true);
      expect(result.files).toEqual(['database', 'origin.json']);
    });
  });
}

function keyOf(fixture: Fixture, fragment: string): string {
  const latest = fixture.manifests.at(-1)!.manifest;
  const entry = latest.files.find((file) => file.key.includes(`${fixture.prefix}/${fragment}`));
  if (entry === undefined) throw new Error(`no file key with ${fragment}`);
  return entry.key;
}

function lastSegmentKey(fixture: Fixture): string {
  return fixture.manifests.at(-1)!.manifest.segments.at(-1)!.key;
}

function flipByte(bytes: Uint8Array): Uint8Array {
  const copy = bytes.slice();
  copy[Math.floor(copy.byteLength / 2)]! ^= 0x5a;
  return copy;
}

/**
 * Renames the roles.json entry. Its key moves along (`side/{name}/…`), so a
 * plain name gets past the manifest parser and must be refused by restore's
 * own checks; the rest the parser already refuses.
 */
function renameFile(manifest: Record<string, unknown>, name: string): void {
  const files = manifest.files as Record<string, unknown>[];
  const roles = files.find((file) => file.name === 'roles.json')!;
  roles.name = name;
  roles.key = `${PREFIX}/side/${name}/${roles.crc32 as string}-${String(roles.size).padStart(20, '0')}`;
}

describe('restore options', () => {
  it('refuses contradictory or out-of-range options before touching anything', async () => {
    const store = new MemoryStore();
    const scratch = await scratchDirectory();
    try {
      const target = join(scratch.path, 't');
      const framed = { materializer: framedStoreMaterializer };
      const cases: [string, Parameters<typeof restore>][] = [
        ['materializer', [store, PREFIX, target, {} as RestoreOptions]],
        ['prefix', [store, '', target, framed]],
        ['prefix', [store, 'a//b', target, framed]],
        [
          'target.commitSeq',
          [store, PREFIX, target, { ...framed, target: { kind: 'commit', commitSeq: -1 } }],
        ],
        [
          'target.commitSeq',
          [store, PREFIX, target, { ...framed, target: { kind: 'commit', commitSeq: 1.5 } }],
        ],
        [
          'target.manifestKey',
          [
            store,
            PREFIX,
            target,
            {
              ...framed,
              target: { kind: 'restore-point', manifestKey: `${PREFIX}/manifest/latest.json` },
            },
          ],
        ],
        [
          'target.manifestKey',
          [
            store,
            PREFIX,
            target,
            {
              ...framed,
              target: {
                kind: 'restore-point',
                manifestKey: 'backups/db2/manifest/00000000000000000001.json',
              },
            },
          ],
        ],
        [
          'materializer',
          [
            store,
            PREFIX,
            target,
            { ...framed, materializer: { ...framedStoreMaterializer, walFileName: '../wal.bin' } },
          ],
        ],
      ];
      for (const [option, args] of cases) {
        const error = await restore(...args).catch((e: unknown) => e);
        expect(RestoreOptionsError.isInstance(error), `${option}: ${String(error)}`).toBe(true);
        expect((error as RestoreOptionsError).option).toBe(option);
      }
      expect(await snapshotTree(target)).toEqual(new Map([['.', 'absent']]));
    } finally {
      await scratch.cleanup();
    }
  });

  it('refuses a malformed target, naming target or its field, before reading the bucket', async () => {
    const store = new MemoryStore();
    const scratch = await scratchDirectory();
    try {
      const target = join(scratch.path, 't');
      const key = manifestKey(PREFIX, 5);
      const cases: [string, unknown][] = [
        ['target', null],
        ['target', 'latest'],
        ['target', {}],
        ['target', { kind: 'manifest', manifestKey: key }],
        ['target', { kind: 'restore-point' }],
        ['target', { kind: 'restore-point', commitSeq: 3 }],
        ['target', { kind: 'commit' }],
        ['target', { kind: 'latest', rollForward: true }],
        ['target', { kind: 'commit', commitSeq: 3, rollForward: true }],
        ['target', { kind: 'commit', commitSeq: 3, manifestKey: key }],
        ['target.commitSeq', { kind: 'commit', commitSeq: '3' }],
        ['target.commitSeq', { kind: 'restore-point', manifestKey: key, commitSeq: 2.5 }],
        ['target.manifestKey', { kind: 'restore-point', manifestKey: 5 }],
        ['target.rollForward', { kind: 'restore-point', manifestKey: key, rollForward: 'yes' }],
      ];
      for (const [option, malformed] of cases) {
        const options = {
          materializer: framedStoreMaterializer,
          target: malformed as RestoreTarget,
        };
        for (const attempt of [
          restore(store, PREFIX, target, options),
          planRestore(store, PREFIX, options),
        ]) {
          const error = await attempt.catch((e: unknown) => e);
          const shown = JSON.stringify(malformed);
          expect(RestoreOptionsError.isInstance(error), `${shown}: ${String(error)}`).toBe(true);
          expect((error as RestoreOptionsError).option, shown).toBe(option);
        }
      }
      expect(await snapshotTree(target)).toEqual(new Map([['.', 'absent']]));
    } finally {
      await scratch.cleanup();
    }
  });

  it('refuses the options target replaced, rather than restoring the latest state', async () => {
    const store = new MemoryStore();
    const key = manifestKey(PREFIX, 5);
    const framed = { materializer: framedStoreMaterializer };
    const cases: [string, RestoreOptions][] = [
      // @ts-expect-error manifestKey is an option no more: target { kind: 'restore-point' }
      ['manifestKey', { ...framed, manifestKey: key }],
      // @ts-expect-error commitSeq is an option no more: target { kind: 'commit' }
      ['commitSeq', { ...framed, commitSeq: 3 }],
      // @ts-expect-error rollForward is an option no more: a field of a restore-point target
      ['rollForward', { ...framed, rollForward: true }],
    ];
    for (const [option, options] of cases) {
      const error = await planRestore(store, PREFIX, options).catch((e: unknown) => e);
      expect(RestoreOptionsError.isInstance(error), `${option}: ${String(error)}`).toBe(true);
      expect((error as RestoreOptionsError).option).toBe(option);
      expect((error as Error).message).toContain('was replaced by target');
    }
  });

  it('takes rollForward only with a restore point (type level)', () => {
    const key = manifestKey(PREFIX, 5);
    const targets: RestoreTarget[] = [
      { kind: 'latest' },
      { kind: 'commit', commitSeq: 3 },
      { kind: 'restore-point', manifestKey: key, commitSeq: 3, rollForward: true },
      // @ts-expect-error the latest state always rolls forward: no rollForward to set
      { kind: 'latest', rollForward: true },
      // @ts-expect-error a commit alone never rolls forward
      { kind: 'commit', commitSeq: 3, rollForward: true },
      // @ts-expect-error a restore-point target needs its manifest key
      { kind: 'restore-point', commitSeq: 3, rollForward: true },
      // @ts-expect-error a commit target needs its commit
      { kind: 'commit' },
    ];
    expect(targets).toHaveLength(7);
  });
});
