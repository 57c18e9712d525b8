/**
 * The `encryption` option: every snapshot and log segment is sealed to the
 * operator's recipients (and, without an identity of theirs, to the
 * worker's tenure key), opens with the operator's identity and with no
 * other; manifests and LATEST stay JSON in clear. Invalid options are
 * refused by typed errors that show no secret key.
 */
import { crc32Hex, parseManifest, parseManifestKey } from '@x/manifest';
import { MemoryStore } from '@x/store';
import {
  decodeSegmentObject,
  readSegmentObjectHeader,
  SegmentObjectKeyError,
} from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import { BackupError, type EncryptionOptions, MAX_ENCRYPTION_RECIPIENTS } from '../src/index.ts';
import { TestDatabase, TestSource } from './helpers/commit-log-engine.ts';
import {
  bucketObjects,
  contentKeys,
  type LoggedEvent,
  latestManifest,
  operatorKey,
  PREFIX,
  secretsIn,
  TestStore,
  testWorker,
} from './helpers/encrypted-worker.ts';

/** Stores commits 0-4 in the snapshot and 5-9 in segments, in two steps. */
async function backUp(db: TestDatabase, store: MemoryStore, encryption: EncryptionOptions) {
  const events: LoggedEvent[] = [];
  db.commit(5);
  const worker = testWorker(store, new TestSource(db), events, { encryption });
  db.commit(3);
  await worker.runOnce();
  db.commit(2);
  await worker.runOnce();
  return { worker, events };
}

describe('encryption at rest', () => {
  it('seals the snapshot and every segment to the recipients and a tenure key; only the operator identity opens them', async () => {
    const operator = operatorKey();
    const stranger = operatorKey();
    const db = new TestDatabase();
    const store = new MemoryStore();
    const { events } = await backUp(db, store, { recipients: [operator.recipient] });

    const objects = await bucketObjects(store);
    const sealed = contentKeys(objects);
    expect(sealed.filter((key) => key.endsWith('.snap'))).toHaveLength(1);
    expect(sealed.filter((key) => key.includes('/wal/')).length).toBeGreaterThanOrEqual(2);
    for (const key of sealed) {
      const stored = objects.get(key)!;
      const header = readSegmentObjectHeader(stored);
      expect(header.encryption, key).toBe('age-x25519');
      const recipients = header.recipients.map((recipient) => recipient.text);
      // The operator's, and the tenure key no later run can use.
      expect(recipients).toHaveLength(2);
      expect(recipients).toContain(operator.recipient.text);
      // Random commits do not compress: in clear, each would be in the object as it is.
      for (const frame of db.frames) expect(Buffer.from(stored).indexOf(frame), key).toBe(-1);
      expect(() => decodeSegmentObject(stored)).toThrow(
        expect.objectContaining({ code: 'SEGMENT_OBJECT_KEY_MISSING' }),
      );
      let refused: unknown;
      try {
        decodeSegmentObject(stored, { identities: [stranger.identity] });
      } catch (error) {
        refused = error;
      }
      expect(SegmentObjectKeyError.isInstance(refused), key).toBe(true);
    }

    // The operator identity opens all of it, and it is the database.
    const latest = await latestManifest(store);
    const bodies = [latest.files[0]!, ...latest.segments].map((entry) => {
      const stored = objects.get(entry.key)!;
      expect(crc32Hex(stored)).toBe(entry.crc32);
      return decodeSegmentObject(stored, { identities: [operator.identity] }).body;
    });
    expect(Buffer.concat(bodies).equals(db.bytes(0))).toBe(true);
    expect(latest.commitSeq).toBe(10);

    // Manifests and LATEST: JSON in clear.
    const manifests = [...objects.keys()].filter(
      (key) => parseManifestKey(PREFIX, key) !== undefined,
    );
    expect(manifests.length).toBeGreaterThanOrEqual(2);
    for (const key of manifests)
      expect(() => parseManifest(objects.get(key)!, { prefix: PREFIX })).not.toThrow();
    expect(new TextDecoder().decode(objects.get(`${PREFIX}/LATEST`)!)).toContain('manifest/');
    expect(
      secretsIn(
        events.map((event) => JSON.stringify(event)),
        [operator],
      ),
    ).toEqual([]);
  });

  it('with an identity of a recipient configured, seals to the recipients alone', async () => {
    const operator = operatorKey();
    const other = operatorKey();
    const db = new TestDatabase();
    const store = new MemoryStore();
    const { events } = await backUp(db, store, {
      recipients: [operator.recipient, other.recipient],
      identities: [operator.identity],
    });
    const objects = await bucketObjects(store);
    for (const key of contentKeys(objects)) {
      const header = readSegmentObjectHeader(objects.get(key)!);
      expect(header.encryption).toBe('age-x25519');
      expect(header.recipients.map((recipient) => recipient.text).sort()).toEqual(
        [operator.recipient.text, other.recipient.text].sort(),
      );
      // Either recipient's identity opens it.
      expect(() =>
        decodeSegmentObject(objects.get(key)!, { identities: [other.identity] }),
      ).not.toThrow();
    }
    expect(
      secretsIn(
        events.map((event) => JSON.stringify(event)),
        [operator, other],
      ),
    ).toEqual([]);
  });

  it('without the option, stores objects in clear as before', async () => {
    const db = new TestDatabase();
    const store = new MemoryStore();
    const events: LoggedEvent[] = [];
    db.commit(2);
    const worker = testWorker(store, new TestSource(db), events);
    db.commit(2);
    await worker.runOnce();
    const objects = await bucketObjects(store);
    for (const key of contentKeys(objects))
      expect(readSegmentObjectHeader(objects.get(key)!)).toMatchObject({
        encryption: 'none',
        recipients: [],
      });
  });

  it('accepts the bytes of a segment whose PUT answer was lost when the retry seals the same content anew', async () => {
    const operator = operatorKey();
    const db = new TestDatabase();
    const store = new TestStore();
    const events: LoggedEvent[] = [];
    db.commit(2);
    const worker = testWorker(store, new TestSource(db), events, {
      encryption: { recipients: [operator.recipient] },
    });
    db.commit(2);
    await worker.runOnce();
    db.commit(3);
    store.loseAnswerOf = (key) => key.endsWith('.seg');
    await expect(worker.runOnce()).rejects.toThrow('was lost');
    const lost = [...(await bucketObjects(store)).keys()].filter((key) => key.endsWith('.seg'));
    // The retry reads the same range and seals it again: other bytes under the same key.
    await worker.runOnce();
    expect(events.filter((event) => event.event === 'backup.step_failed')).toEqual([]);
    const objects = await bucketObjects(store);
    expect([...objects.keys()].filter((key) => key.endsWith('.seg'))).toEqual(lost);
    const latest = await latestManifest(store);
    let previous = latest.files[0]!.crc32;
    for (const entry of latest.segments) {
      const stored = objects.get(entry.key)!;
      expect(crc32Hex(stored), entry.key).toBe(entry.crc32);
      const { header } = decodeSegmentObject(stored, { identities: [operator.identity] });
      expect(header.previousCrc32, entry.key).toBe(Number.parseInt(previous, 16));
      previous = entry.crc32;
    }
    expect(latest.commitSeq).toBe(7);
  });
});

describe('the encryption option is checked at construction', () => {
  const db = new TestDatabase();
  const construct = (encryption: unknown) => () =>
    testWorker(new MemoryStore(), new TestSource(db), [], {
      encryption: encryption as EncryptionOptions,
    });
  const refusal = (encryption: unknown): BackupError => {
    try {
      construct(encryption)();
    } catch (error) {
      if (BackupError.isInstance(error)) return error;
      throw error;
    }
    throw new Error('not refused');
  };

  it('refuses no recipient, too many, a duplicate, and what is not a key, naming the option', () => {
    const operator = operatorKey();
    const many = Array.from(
      { length: MAX_ENCRYPTION_RECIPIENTS + 1 },
      () => operatorKey().recipient,
    );
    const refusals = [
      refusal({ recipients: [] }),
      refusal({}),
      refusal({ recipients: many }),
      refusal({ recipients: [operator.recipient, operator.recipient] }),
      refusal({ recipients: [{ text: operator.secretText, publicKey: new Uint8Array(32) }] }),
      refusal({ recipients: [operator.secretText] }),
      refusal({ recipients: [operator.recipient], identities: [operator.secretText] }),
      refusal({
        recipients: [operator.recipient],
        identities: [{ ...operator.identity, recipient: operatorKey().recipient }],
      }),
    ];
    for (const error of refusals) {
      expect(error.code).toBe('BACKUP_ERROR');
      expect(error.message).toMatch(/^invalid encryption/);
    }
    expect(refusals[2]!.message).toContain(`at most ${MAX_ENCRYPTION_RECIPIENTS}`);
    expect(refusals[3]!.message).toContain(`${operator.recipient.text} is listed twice`);
    expect(
      secretsIn(
        refusals.map((error) => `${error.message} ${String(error.stack)}`),
        [operator],
      ),
    ).toEqual([]);
    expect(() =>
      construct({ recipients: many.slice(0, MAX_ENCRYPTION_RECIPIENTS) })(),
    ).not.toThrow();
  });
});
