/**
 * A restart continues the newest restore point's generation only when its
 * objects are sealed to exactly the recipients this worker writes to and it
 * can open them: with the operator's identity configured, as without
 * encryption; without it (the previous run's tenure key is gone), after a
 * change of recipients, or with encryption turned on or off, it takes a new
 * snapshot and says why. The source here proves its state by a graceful
 * stop's record unless a test says otherwise, so only the recipients keep
 * such a restart from continuing.
 */
import { MemoryStore } from '@x/store';
import { decodeSegmentObject, readSegmentObjectHeader } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import type { EncryptionOptions } from '../src/index.ts';
import { TestDatabase, TestSource } from './helpers/commit-log-engine.ts';
import {
  bucketObjects,
  contentKeys,
  type LoggedEvent,
  latestManifest,
  type OperatorKey,
  operatorKey,
  secretsIn,
  testWorker,
} from './helpers/encrypted-worker.ts';

interface Life {
  readonly encryption?: EncryptionOptions;
  readonly proof?: 'record' | 'content';
  /** Stop without a flush or a record (a crash), after shipping beyond the restore point. */
  readonly crash?: boolean;
}

function setUp() {
  const db = new TestDatabase();
  const store = new MemoryStore();
  const events: LoggedEvent[] = [];
  db.commit(4);
  /** One run of the worker: a step, commits and steps, a graceful stop. Returns this life's events. */
  const live = async (life: Life): Promise<LoggedEvent[]> => {
    const mine: LoggedEvent[] = [];
    const source = new TestSource(db, { proof: life.proof ?? 'record' });
    const worker = testWorker(store, source, mine, {
      ...(life.encryption === undefined ? {} : { encryption: life.encryption }),
      // A crashing life writes one restore point, then ships past it.
      ...(life.crash ? { manifestIntervalMs: 3_600_000 } : {}),
    });
    // The first step decides on continuation: the database is as the last stop left it.
    await worker.runOnce();
    db.commit(3);
    await worker.runOnce();
    db.commit(2);
    await worker.runOnce();
    if (!life.crash) {
      await worker.flush();
      source.stop();
    }
    events.push(...mine);
    return mine;
  };
  const snapshots = async () =>
    contentKeys(await bucketObjects(store)).filter((key) => key.endsWith('.snap'));
  return { db, store, events, live, snapshots };
}

const named = (events: readonly LoggedEvent[], name: string) =>
  events.filter((event) => event.event === name);

function skippedBecause(events: readonly LoggedEvent[]): string[] {
  return named(events, 'backup.continuation_skipped').map((event) => String(event.fields.reason));
}

function withIdentity(key: OperatorKey): EncryptionOptions {
  return { recipients: [key.recipient], identities: [key.identity] };
}

describe('a restart of an encrypted backup', () => {
  it('with the operator identity, continues the generation (no new snapshot) and keeps sealing to the recipients', async () => {
    const operator = operatorKey();
    const { db, store, events, live, snapshots } = setUp();
    await live({ encryption: withIdentity(operator) });
    // The source reads the restore point back (decrypting it) to prove its state.
    const second = await live({ encryption: withIdentity(operator), proof: 'content' });
    expect(named(second, 'backup.generation_continued')).toHaveLength(1);
    expect(
      named(second, 'backup.generation_continued')[0]!.fields.restorePointBytesRead,
    ).toBeGreaterThan(0);
    expect(skippedBecause(second)).toEqual([]);
    expect(await snapshots()).toHaveLength(1);
    const latest = await latestManifest(store);
    expect(latest.walGeneration).toBe(0);
    expect(latest.commitSeq).toBe(db.frames.length);
    const objects = await bucketObjects(store);
    const bodies = [latest.files[0]!, ...latest.segments].map((entry) => {
      const header = readSegmentObjectHeader(objects.get(entry.key)!);
      expect(header.recipients.map((recipient) => recipient.text)).toEqual([
        operator.recipient.text,
      ]);
      return decodeSegmentObject(objects.get(entry.key)!, { identities: [operator.identity] }).body;
    });
    expect(Buffer.concat(bodies).equals(db.bytes(0))).toBe(true);
    expect(
      secretsIn(
        events.map((event) => JSON.stringify(event)),
        [operator],
      ),
    ).toEqual([]);
  });

  it('with the operator identity, adopts the sealed segments a crashed run left after its restore point', async () => {
    const operator = operatorKey();
    const { db, store, live, snapshots } = setUp();
    await live({ encryption: withIdentity(operator), crash: true });
    const second = await live({ encryption: withIdentity(operator), proof: 'content' });
    const continued = named(second, 'backup.generation_continued');
    expect(continued).toHaveLength(1);
    expect(continued[0]!.fields.tailSegments).toBeGreaterThanOrEqual(1);
    expect(await snapshots()).toHaveLength(1);
    expect((await latestManifest(store)).commitSeq).toBe(db.frames.length);
  });

  it('without an identity, takes a new snapshot at every restart and says why', async () => {
    const operator = operatorKey();
    const { store, events, live, snapshots } = setUp();
    await live({ encryption: { recipients: [operator.recipient] } });
    const second = await live({ encryption: { recipients: [operator.recipient] } });
    expect(skippedBecause(second)).toEqual([
      'no age identity configured: generation 0 is sealed to the key of the run that wrote it: a restart takes a new snapshot',
    ]);
    expect(named(second, 'backup.generation_continued')).toEqual([]);
    expect(await snapshots()).toHaveLength(2);
    expect((await latestManifest(store)).walGeneration).toBe(1);
    // Each run sealed to a tenure key of its own.
    const tenureKeys = new Set<string>();
    const objects = await bucketObjects(store);
    for (const key of contentKeys(objects))
      for (const recipient of readSegmentObjectHeader(objects.get(key)!).recipients)
        if (recipient.text !== operator.recipient.text) tenureKeys.add(recipient.text);
    expect(tenureKeys.size).toBe(2);
    expect(
      secretsIn(
        events.map((event) => JSON.stringify(event)),
        [operator],
      ),
    ).toEqual([]);
  });

  it('with other recipients, takes a new snapshot and says why', async () => {
    const first = operatorKey();
    const second = operatorKey();
    const { store, live, snapshots } = setUp();
    await live({ encryption: withIdentity(first) });
    const changed = await live({ encryption: withIdentity(second) });
    expect(skippedBecause(changed)).toEqual([
      "encryption changed: recipients differ from generation 0's: a restart takes a new snapshot",
    ]);
    // One more recipient is a change too: a generation holds one recipient set.
    const added = await live({
      encryption: {
        recipients: [second.recipient, first.recipient],
        identities: [second.identity],
      },
    });
    expect(skippedBecause(added)).toEqual([
      "encryption changed: recipients differ from generation 1's: a restart takes a new snapshot",
    ]);
    expect(await snapshots()).toHaveLength(3);
    const objects = await bucketObjects(store);
    const latest = await latestManifest(store);
    expect(latest.walGeneration).toBe(2);
    for (const entry of [latest.files[0]!, ...latest.segments])
      expect(
        readSegmentObjectHeader(objects.get(entry.key)!)
          .recipients.map((recipient) => recipient.text)
          .sort(),
      ).toEqual([first.recipient.text, second.recipient.text].sort());
  });

  it('with encryption turned off, takes a new snapshot and stores the new generation in clear', async () => {
    const operator = operatorKey();
    const { store, live, snapshots } = setUp();
    await live({ encryption: withIdentity(operator) });
    const off = await live({});
    expect(skippedBecause(off)).toEqual([
      'encryption changed: generation 0 is encrypted, this worker writes in clear: a restart takes a new snapshot',
    ]);
    expect(await snapshots()).toHaveLength(2);
    const objects = await bucketObjects(store);
    const latest = await latestManifest(store);
    expect(latest.walGeneration).toBe(1);
    for (const entry of [latest.files[0]!, ...latest.segments])
      expect(readSegmentObjectHeader(objects.get(entry.key)!).encryption).toBe('none');
  });

  it('with encryption turned on, takes a new snapshot and seals the new generation', async () => {
    const operator = operatorKey();
    const { store, live, snapshots } = setUp();
    await live({});
    const on = await live({ encryption: withIdentity(operator) });
    expect(skippedBecause(on)).toEqual([
      'encryption changed: generation 0 is in clear, this worker encrypts: a restart takes a new snapshot',
    ]);
    expect(await snapshots()).toHaveLength(2);
    const objects = await bucketObjects(store);
    const latest = await latestManifest(store);
    for (const entry of [latest.files[0]!, ...latest.segments])
      expect(readSegmentObjectHeader(objects.get(entry.key)!).encryption).toBe('age-x25519');
  });

  it('without encryption before and after, continues as before', async () => {
    const { live, snapshots } = setUp();
    await live({});
    const again = await live({});
    expect(named(again, 'backup.generation_continued')).toHaveLength(1);
    expect(await snapshots()).toHaveLength(1);
  });
});
