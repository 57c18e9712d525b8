/**
 * The lease holder heals an unusable LATEST when it resumes: a conditional
 * rewrite to the newest manifest it can read and check, logged as
 * `backup.latest_repaired`; a racing writer's LATEST is not overwritten; and
 * with nothing to heal it with, the worker refuses the prefix for good,
 * unhealthy with a reason that says what to do.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupError, type BackupLogger, BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { latestKey, MAX_LATEST_BYTES, manifestKey, parseLatest } from '@x/manifest';
import { FramedDirSource } from '@x/source-framed';
import type { ObjectStore, ObjectVersion, PutOptions } from '@x/store';
import { ForwardingStore } from '@x/store/adapter';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { CountingStore, localStoreCases } from './helpers/stores.ts';

const encode = (text: string): Uint8Array => new TextEncoder().encode(text);

interface LogLine {
  readonly level: string;
  readonly event: string;
  readonly fields: Record<string, unknown>;
}

function recordingLogger(lines: LogLine[]): BackupLogger {
  const record =
    (level: string) =>
    (event: string, fields: Record<string, unknown> = {}): void => {
      lines.push({ level, event, fields });
    };
  return { info: record('info'), warn: record('warn'), error: record('error') } as BackupLogger;
}

/** Records every PUT of LATEST (its body and mode) and how it ended. */
class LatestWatch extends ForwardingStore {
  readonly puts: { body: string; mode: unknown; ok: boolean }[] = [];
  /** Runs once, before the next PUT of LATEST reaches the store. */
  beforeLatestPut: (() => Promise<void>) | null = null;
  #latest: string;

  constructor(inner: ObjectStore, prefix: string) {
    super(inner);
    this.#latest = latestKey(prefix);
  }

  override put(
    key: string,
    body: Uint8Array,
    options?: PutOptions,
  ): Promise<{ version: ObjectVersion }> {
    if (key !== this.#latest) return super.put(key, body, options);
    return (async () => {
      const hook = this.beforeLatestPut;
      this.beforeLatestPut = null;
      if (hook) await hook();
      const entry = { body: new TextDecoder().decode(body), mode: options?.mode, ok: false };
      this.puts.push(entry);
      const result = await super.put(key, body, options);
      entry.ok = true;
      return result;
    })();
  }
}

for (const storeCase of localStoreCases()) {
  describe(`an unusable LATEST at resume (${storeCase.name})`, () => {
    let root: string;
    let store: ObjectStore;
    let prefix: string;
    let close: () => Promise<void>;
    let engine: FramedTestEngine;
    /** The manifests the first worker wrote, oldest first. */
    let manifests: string[];

    function workerFor(target: ObjectStore, lines: LogLine[] = []): BackupWorker {
      return new BackupWorker({
        store: target,
        prefix,
        source: new FramedDirSource({ directory: engine.directory, engine }),
        clock: new FakeClock(),
        manifestIntervalMs: 0,
        logger: recordingLogger(lines),
      });
    }

    async function latestTarget(): Promise<string> {
      const object = await store.get(latestKey(prefix));
      return parseLatest(object!.body, { prefix });
    }

    beforeEach(async () => {
      root = await mkdtemp(join(tmpdir(), 'corrupt-latest-worker-'));
      ({ store, prefix, close } = await storeCase.open());
      engine = await FramedTestEngine.create(join(root, 'store'));
      const first = workerFor(store);
      await engine.commit(2);
      await first.runOnce();
      await engine.commit(3);
      await first.runOnce();
      const listed = await store.list(`${prefix}/manifest/`);
      manifests = listed.objects.map((object) => object.key).sort();
      expect(manifests.length).toBeGreaterThanOrEqual(2);
      expect(await latestTarget()).toBe(manifests.at(-1));
    });
    afterEach(async () => {
      await rm(root, { recursive: true, force: true });
      await close();
    });

    const damages: { what: string; plant: () => Promise<void>; problem: () => string }[] = [
      {
        what: 'truncated',
        plant: () =>
          store
            .put(latestKey(prefix), encode(manifests.at(-1)!.slice(0, -9)), { mode: 'overwrite' })
            .then(() => {}),
        problem: () => 'LATEST does not name a manifest',
      },
      {
        what: 'garbage',
        plant: () =>
          store
            .put(latestKey(prefix), Uint8Array.from([0xff, 0x00, 0x41]), { mode: 'overwrite' })
            .then(() => {}),
        problem: () => 'LATEST does not name a manifest',
      },
      {
        what: 'too large',
        plant: () =>
          store
            .put(latestKey(prefix), new Uint8Array(MAX_LATEST_BYTES + 1).fill(0x61), {
              mode: 'overwrite',
            })
            .then(() => {}),
        problem: () => `larger than ${MAX_LATEST_BYTES} bytes`,
      },
      {
        what: 'naming a missing manifest',
        plant: () =>
          store
            .put(latestKey(prefix), encode(manifestKey(prefix, 999)), { mode: 'overwrite' })
            .then(() => {}),
        problem: () => `LATEST names ${manifestKey(prefix, 999)}, which does not exist`,
      },
    ];
    for (const { what, plant, problem } of damages) {
      it(`a ${what} LATEST is rewritten, conditionally, to the newest manifest`, async () => {
        await plant();
        const lines: LogLine[] = [];
        const watch = new LatestWatch(store, prefix);
        const worker = workerFor(watch, lines);
        await worker.runOnce();
        const repaired = lines.filter((line) => line.event === 'backup.latest_repaired');
        expect(repaired).toHaveLength(1);
        expect(repaired[0]!.fields.to).toBe(manifests.at(-1));
        expect(String(repaired[0]!.fields.problem)).toContain(problem());
        // The first write of LATEST is the repair, against the version read.
        expect(watch.puts[0]).toMatchObject({ body: manifests.at(-1), ok: true });
        expect(watch.puts[0]!.mode).toHaveProperty('ifMatch');
        // And the worker went on backing up: LATEST names a readable manifest.
        const now = await latestTarget();
        expect((await store.list(`${prefix}/manifest/`)).objects.map((o) => o.key)).toContain(now);
        expect(worker.health().latestRestorePoint?.manifestKey).toBe(now);
      });
    }

    it('LATEST naming a manifest that does not parse is healed to the one before it', async () => {
      await store.put(manifests.at(-1)!, encode('{"formatVersion": 1,'), { mode: 'overwrite' });
      const lines: LogLine[] = [];
      const watch = new LatestWatch(store, prefix);
      await workerFor(watch, lines).runOnce();
      const repaired = lines.find((line) => line.event === 'backup.latest_repaired');
      expect(repaired?.fields).toMatchObject({ from: manifests.at(-1), to: manifests.at(-2) });
      expect(String(repaired?.fields.problem)).toContain('does not parse');
      expect(watch.puts[0]).toMatchObject({ body: manifests.at(-2), ok: true });
      expect(watch.puts[0]!.mode).toHaveProperty('ifMatch');
    });

    it("a racing writer's LATEST is not overwritten: the repair loses, LATEST is read again", async () => {
      const newest = manifests.at(-1)!;
      const good = (await store.get(newest))!.body;
      // The newest manifest is unreadable, so the repair would pick the one before.
      await store.put(newest, encode('not json'), { mode: 'overwrite' });
      const lines: LogLine[] = [];
      const watch = new LatestWatch(store, prefix);
      watch.beforeLatestPut = async () => {
        // Another writer puts the newest manifest back and points LATEST at it.
        await store.put(newest, good, { mode: 'overwrite' });
        await store.put(latestKey(prefix), encode(newest), { mode: 'overwrite' });
      };
      const worker = workerFor(watch, lines);
      await worker.runOnce();
      // The repair was tried against the version read, and refused.
      expect(watch.puts[0]).toMatchObject({ body: manifests.at(-2), ok: false });
      expect(watch.puts[0]!.mode).toHaveProperty('ifMatch');
      expect(lines.some((line) => line.event === 'backup.latest_repaired')).toBe(false);
      // The older manifest was never written over the racing writer's LATEST.
      expect(watch.puts.filter((put) => put.ok).map((put) => put.body)).not.toContain(
        manifests.at(-2),
      );
      expect(lines.some((line) => line.event === 'backup.step_failed')).toBe(false);
    });

    for (const latestBody of ['garbage', 'the newest manifest key'] as const)
      it(`nothing to heal it with (LATEST: ${latestBody}): refused for good, unhealthy with what to do, nothing written`, async () => {
        const named = latestBody === 'garbage' ? 'garbage' : manifests.at(-1)!;
        await store.put(latestKey(prefix), encode(named), { mode: 'overwrite' });
        for (const key of manifests) await store.put(key, encode('{'), { mode: 'overwrite' });
        const before = new Map(
          (await store.list(`${prefix}/`)).objects.map((o) => [o.key, JSON.stringify(o.version)]),
        );
        const counting = new CountingStore(store);
        const worker = workerFor(counting);
        const error = await worker.runOnce().catch((e: unknown) => e);
        expect(BackupError.hasCode(error, 'LINEAGE_REFUSED'), String(error)).toBe(true);
        const reason = (error as BackupError).reason;
        expect(reason).toContain(
          latestBody === 'garbage'
            ? 'LATEST does not name a manifest'
            : `LATEST names ${named}, which does not parse`,
        );
        const others = latestBody === 'garbage' ? manifests.length : manifests.length - 1;
        expect(reason).toContain(
          `none of the ${others} manifest(s) under ${prefix}/manifest/ can be read and checked`,
        );
        expect(reason).toContain('there is no restore point to resume from');
        expect(reason).toContain('Point the worker at a new prefix');
        // Permanent: the next step refuses without a request.
        const counts = { ...counting.counts };
        await expect(worker.runOnce()).rejects.toThrow('there is no restore point to resume from');
        expect(counting.counts).toEqual(counts);
        // Nothing written but the lease.
        expect(counting.writes.filter((write) => !write.includes('LEASE'))).toEqual([]);
        const after = new Map(
          (await store.list(`${prefix}/`)).objects.map((o) => [o.key, JSON.stringify(o.version)]),
        );
        for (const [key, version] of before)
          if (!key.endsWith('/LEASE')) expect(after.get(key), key).toBe(version);
        await worker.step();
        const health = worker.health();
        expect(health.healthy).toBe(false);
        expect(health.reason).toContain('there is no restore point to resume from');
        // Health never names a restore point that did not pass the checks.
        expect(health.latestRestorePoint).toBeNull();
      });
  });
}
