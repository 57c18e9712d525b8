/**
 * A tiny engine that writes the framed store-directory layout, for tests.
 *
 * Commit `c` (1-based, counted from the store's beginning) is one frame whose
 * payload is `commit-{c}`; a snapshot taken at `c` commits holds the text
 * `snapshot-at-{c}`. So any restore point can be checked against "the source
 * at that commit" without keeping copies: its frames must be
 * `commit-{floor+1} … commit-{commitSeq}` and its snapshot the text for the
 * commits before its WAL.
 */

import { appendFile, cp, mkdir, open, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { DurablePosition } from '@x/engine';
import { type FramedEngineHandle, identifyFramedFiles } from '@x/source-framed';
import { encodeFrame } from '@x/wal-segment';

export function floorBytes(floor: number): Uint8Array {
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(floor), true);
  return bytes;
}

export class FramedTestEngine implements FramedEngineHandle {
  readonly directory: string;
  /** Commits written (durable or not). */
  commits = 0;
  /** Commits fsynced (what the handle reports). */
  durableCommits = 0;
  floor = 0;
  generation = 0;
  snapshotInProgress = false;
  #walLength = 0;
  #durableLength = 0;
  #nextArchive = 1;
  #archives: string[] = [];

  private constructor(directory: string) {
    this.directory = directory;
  }

  static async create(directory: string): Promise<FramedTestEngine> {
    await mkdir(directory, { recursive: true });
    const engine = new FramedTestEngine(directory);
    await writeFile(join(directory, 'wal.bin'), new Uint8Array(0));
    await writeFile(join(directory, 'roles.json'), '{"roles":[]}');
    await writeFile(join(directory, 'keys.json'), '{"keys":[]}');
    await writeFile(join(directory, 'wal.genesis'), 'genesis-0');
    return engine;
  }

  /**
   * A copy of this store in `directory` with the same state (what a restore
   * of everything durable produces, or a backup of the directory taken now).
   * `parent` writes a parent record and drops the lineage file, as a restore
   * does.
   */
  async clone(
    directory: string,
    options: { parent?: { lineage: string; manifestKey: string; commitSeq: number } } = {},
  ): Promise<FramedTestEngine> {
    await cp(this.directory, directory, { recursive: true });
    const copy = new FramedTestEngine(directory);
    copy.commits = this.commits;
    copy.durableCommits = this.durableCommits;
    copy.floor = this.floor;
    copy.generation = this.generation;
    copy.#walLength = this.#walLength;
    copy.#durableLength = this.#durableLength;
    copy.#nextArchive = this.#nextArchive;
    copy.#archives = [...this.#archives];
    if (options.parent) {
      await rm(join(directory, 'backup.lineage'), { force: true });
      await writeFile(join(directory, 'backup.parent'), JSON.stringify(options.parent));
    }
    return copy;
  }

  /**
   * An engine over a directory `restore()` wrote from this engine's backup at
   * its current (durable) state: same counters, same files.
   */
  async restoredInto(directory: string): Promise<FramedTestEngine> {
    const copy = new FramedTestEngine(directory);
    copy.commits = this.durableCommits;
    copy.durableCommits = this.durableCommits;
    copy.floor = this.floor;
    copy.generation = this.generation;
    copy.#walLength = this.#durableLength;
    copy.#durableLength = this.#durableLength;
    copy.#nextArchive = this.#nextArchive;
    copy.#archives = [...this.#archives];
    return copy;
  }

  path(name: string): string {
    return join(this.directory, name);
  }

  /** Appends `count` commits; fsynced (durable) unless `durable: false`. */
  async commit(
    count = 1,
    options: { durable?: boolean; payloadBytes?: number } = {},
  ): Promise<void> {
    const frames: Uint8Array[] = [];
    for (let i = 0; i < count; i += 1) {
      this.commits += 1;
      const text = `commit-${this.commits}`;
      const payload = new Uint8Array(Math.max(text.length, options.payloadBytes ?? 0));
      payload.set(new TextEncoder().encode(text));
      frames.push(encodeFrame(payload));
    }
    const bytes = Buffer.concat(frames);
    await appendFile(this.path('wal.bin'), bytes);
    this.#walLength += bytes.byteLength;
    if (options.durable ?? true) this.sync();
  }

  /** Makes every written commit durable. */
  sync(): void {
    this.#durableLength = this.#walLength;
    this.durableCommits = this.commits;
  }

  /**
   * Takes a snapshot: intent, `snapshot.bin`, the WAL archived, a new WAL,
   * intent cleared. `compact` drops the archives and raises the floor.
   * `pauseInIntent` runs while the intent is non-empty.
   */
  async snapshot(
    options: { compact?: boolean; pauseInIntent?: () => Promise<void> } = {},
  ): Promise<void> {
    this.sync();
    await writeFile(this.path('snapshot.intent'), 'snapshot in progress');
    this.snapshotInProgress = true;
    await writeFile(this.path('snapshot.bin.tmp'), `snapshot-at-${this.commits}`);
    await rename(this.path('snapshot.bin.tmp'), this.path('snapshot.bin'));
    await options.pauseInIntent?.();
    if (options.compact) {
      for (const name of this.#archives) await rm(this.path(name), { force: true });
      this.#archives = [];
      this.floor = this.commits;
      await writeFile(this.path('wal.floor'), floorBytes(this.floor));
      await writeFile(this.path('wal.genesis'), `genesis-${this.commits}`);
      await rm(this.path('wal.bin'));
    } else {
      const name = `wal.${this.#nextArchive++}.archive`;
      await rename(this.path('wal.bin'), this.path(name));
      this.#archives.push(name);
    }
    await writeFile(this.path('wal.bin'), new Uint8Array(0));
    this.#walLength = 0;
    this.#durableLength = 0;
    this.generation += 1;
    await writeFile(this.path('snapshot.intent'), '');
    this.snapshotInProgress = false;
  }

  /** Rewrites a per-manifest side file. */
  async setRoles(text: string): Promise<void> {
    const handle = await open(this.path('roles.json'), 'w');
    await handle.writeFile(text);
    await handle.close();
  }

  async durablePosition(): Promise<DurablePosition> {
    const { snapshot, wal } = await identifyFramedFiles(this.directory);
    return {
      engineGeneration: String(this.generation),
      snapshot,
      wal,
      durableLength: this.#durableLength,
      commitCount: this.durableCommits,
      snapshotInProgress: this.snapshotInProgress,
    };
  }
}
