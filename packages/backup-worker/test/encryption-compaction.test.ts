/**
 * Compaction of an encrypted generation: the worker opens its inputs with
 * its tenure key or the configured identity, whether it still holds their
 * bytes or downloads them (too large for its cache, or shipped by the run
 * before a restart), and seals the merged object to the same recipients as
 * the rest of the generation.
 */
import { FakeClock } from '@x/lease';
import { crc32Hex, parseSegmentKey } from '@x/manifest';
import { decodeSegmentObject, readSegmentObjectHeader } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import type { BackupWorker, EncryptionOptions } from '../src/index.ts';
import { TestDatabase, TestSource } from './helpers/commit-log-engine.ts';
import {
  bucketObjects,
  type LoggedEvent,
  latestManifest,
  type OperatorKey,
  operatorKey,
  PREFIX,
  secretsIn,
  TestStore,
  testWorker,
} from './helpers/encrypted-worker.ts';

const WINDOW_MS = 30_000;

/** Steps until a compaction in flight has finished and been applied. */
async function stepSettled(worker: BackupWorker): Promise<void> {
  for (let i = 0; i < 3; i += 1) {
    await worker.runOnce();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await worker.runOnce();
}

function compactedKeys(keys: Iterable<string>): string[] {
  return [...keys].filter((key) => parseSegmentKey(PREFIX, key)?.layout === 'compacted');
}

/**
 * What LATEST names is sealed to `recipients` alone, opens with
 * `operator`'s identity, and is the database; returns its compacted keys.
 */
async function checkSealedChain(
  store: TestStore,
  db: TestDatabase,
  operator: OperatorKey,
  recipients: (texts: string[]) => void,
): Promise<string[]> {
  const objects = await bucketObjects(store);
  const latest = await latestManifest(store);
  const bodies = [latest.files[0]!, ...latest.segments].map((entry) => {
    const stored = objects.get(entry.key)!;
    expect(crc32Hex(stored)).toBe(entry.crc32);
    const header = readSegmentObjectHeader(stored);
    expect(header.encryption, entry.key).toBe('age-x25519');
    recipients(header.recipients.map((recipient) => recipient.text).sort());
    return decodeSegmentObject(stored, { identities: [operator.identity] }).body;
  });
  expect(Buffer.concat(bodies).equals(db.bytes(0))).toBe(true);
  return compactedKeys(latest.segments.map((segment) => segment.key));
}

function setUp(encryption: (operator: OperatorKey) => EncryptionOptions) {
  const operator = operatorKey();
  const db = new TestDatabase();
  const store = new TestStore();
  const clock = new FakeClock();
  const events: LoggedEvent[] = [];
  db.commit(3);
  const start = (source = new TestSource(db)) =>
    testWorker(store, source, events, {
      encryption: encryption(operator),
      clock,
      compactionLevels: [WINDOW_MS],
      exactWindowMs: 0,
    });
  return { operator, db, store, clock, events, start };
}

const named = (events: readonly LoggedEvent[], name: string) =>
  events.filter((event) => event.event === name);

describe('compaction of an encrypted generation', () => {
  it('merges segments sealed to a tenure key into an object sealed to the same recipients', async () => {
    const { operator, db, store, clock, events, start } = setUp((key) => ({
      recipients: [key.recipient],
    }));
    const worker = start();
    for (let step = 0; step < 16; step += 1) {
      db.commit(2);
      await stepSettled(worker);
      clock.advance(5_000);
    }
    expect(named(events, 'backup.compaction_failed')).toEqual([]);
    expect(named(events, 'backup.log_compacted').length).toBeGreaterThanOrEqual(1);
    // Every input came from what the worker had just stored.
    expect(store.gets.filter((key) => key.includes('/wal/'))).toEqual([]);
    let generationRecipients: string[] | null = null;
    const compacted = await checkSealedChain(store, db, operator, (texts) => {
      // One set for the whole generation: the operator's and this run's tenure key.
      generationRecipients ??= texts;
      expect(texts).toEqual(generationRecipients);
      expect(texts).toHaveLength(2);
      expect(texts).toContain(operator.recipient.text);
    });
    expect(compacted.length).toBeGreaterThanOrEqual(1);
    expect(
      secretsIn(
        events.map((event) => JSON.stringify(event)),
        [operator],
      ),
    ).toEqual([]);
  });

  it('downloads an input too large for its cache and opens it with the tenure key', async () => {
    const { operator, db, store, clock, events, start } = setUp((key) => ({
      recipients: [key.recipient],
    }));
    const worker = start();
    await worker.runOnce();
    // One commit larger than the input cache (32 MiB): its segment is not kept.
    db.commit(1, 33 * 1024 * 1024);
    await worker.runOnce();
    const large = (await latestManifest(store)).segments.at(-1)!.key;
    for (let step = 0; step < 8; step += 1) {
      db.commit(1);
      await stepSettled(worker);
      clock.advance(5_000);
    }
    // Its merge takes longer than a step: until the next restore point names the merged object.
    const chainKeys = async () =>
      (await latestManifest(store)).segments.map((segment) => segment.key);
    for (let wait = 0; wait < 100 && (await chainKeys()).includes(large); wait += 1)
      await stepSettled(worker);
    expect(named(events, 'backup.compaction_failed')).toEqual([]);
    expect(store.gets).toContain(large);
    const compacted = await checkSealedChain(store, db, operator, (texts) => {
      expect(texts).toHaveLength(2);
    });
    // The large segment is inside a compacted object now.
    const latest = await latestManifest(store);
    expect(latest.segments.map((segment) => segment.key)).not.toContain(large);
    expect(compacted.length).toBeGreaterThanOrEqual(1);
  });

  it('after a restart with the operator identity, downloads the last run’s segments and merges them with its own', async () => {
    const { operator, db, store, clock, events, start } = setUp((key) => ({
      recipients: [key.recipient],
      identities: [key.identity],
    }));
    const firstSource = new TestSource(db);
    const first = start(firstSource);
    for (let step = 0; step < 3; step += 1) {
      db.commit(2);
      await first.runOnce();
      clock.advance(1_000);
    }
    await first.flush();
    firstSource.stop();
    const shipped = (await latestManifest(store)).segments.map((segment) => segment.key);

    // Proven by the stop's record: the restart itself reads no segment back.
    const second = start(new TestSource(db));
    await second.runOnce();
    expect(named(events, 'backup.generation_continued')).toHaveLength(1);
    for (let step = 0; step < 10; step += 1) {
      db.commit(2);
      await stepSettled(second);
      clock.advance(5_000);
    }
    expect(named(events, 'backup.compaction_failed')).toEqual([]);
    // The first run's segments were downloaded (not in this run's cache) and merged away.
    for (const key of shipped) expect(store.gets).toContain(key);
    const latest = await latestManifest(store);
    expect(latest.walGeneration).toBe(0);
    for (const key of shipped)
      expect(latest.segments.map((segment) => segment.key)).not.toContain(key);
    const compacted = await checkSealedChain(store, db, operator, (texts) => {
      expect(texts).toEqual([operator.recipient.text]);
    });
    expect(compacted.length).toBeGreaterThanOrEqual(1);
  });
});
