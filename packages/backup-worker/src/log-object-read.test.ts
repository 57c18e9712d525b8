import { generateIdentity, parseIdentity, parseRecipient } from '@x/age-envelope';
import { FakeClock } from '@x/lease';
import { crc32Hex, segmentObjectKey } from '@x/manifest';
import { MemoryStore } from '@x/store';
import { encodeFrame, encodeSegmentObject } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import { readCheckedLogObject } from './log-object-read.ts';
import { ObjectKeys } from './object-keys.ts';
import { Requests } from './requests.ts';

function operator() {
  const generated = generateIdentity();
  return {
    recipient: parseRecipient(generated.recipient),
    identity: parseIdentity(generated.identity, 'operator.key'),
  };
}

const body = encodeFrame(new TextEncoder().encode('one commit'));
const key = segmentObjectKey('p', 0, 0, body.byteLength);

/** Reads `key` back, stored as a segment sealed to `recipients`, with `keys`. */
async function readBack(recipients: ReturnType<typeof operator>['recipient'][], keys: ObjectKeys) {
  const stored = encodeSegmentObject(
    body,
    {
      codec: 'zstd',
      kind: 'segment',
      generation: 0,
      start: 0,
      end: body.byteLength,
      commits: 1,
      previousCrc32: 0,
      lineage: 'L',
    },
    { recipients },
  );
  const store = new MemoryStore();
  await store.put(key, stored);
  const requests = new Requests({
    store,
    clock: new FakeClock(),
    operationTimeoutMs: 1_000,
    conditional: true,
    callbacks: {
      runSignal: () => new AbortController().signal,
      writeFence: () => null,
      conflict: (what) => new Error(what),
    },
  });
  return readCheckedLogObject({
    requests,
    prefix: 'p',
    generation: 0,
    entry: { key, size: stored.byteLength, crc32: crc32Hex(stored), frames: 1, lineage: 'L' },
    keys,
    fail: (failed, problem) => new Error(`${failed}: ${problem}`),
  });
}

describe('readCheckedLogObject of a sealed object', () => {
  const a = operator();
  const b = operator();
  const keys = new ObjectKeys({ recipients: [a.recipient], identities: [a.identity] });

  it('opens one sealed to exactly the worker’s recipients', async () => {
    const read = await readBack([a.recipient], keys);
    expect(Buffer.from(read.body).equals(body)).toBe(true);
  });

  it('refuses one sealed to other recipients, even one it could open', async () => {
    await expect(readBack([a.recipient, b.recipient], keys)).rejects.toThrow(
      `${key}: encryption changed: recipients differ from the object's`,
    );
  });

  it('refuses one in clear when the worker encrypts, and a sealed one when it does not', async () => {
    await expect(readBack([], keys)).rejects.toThrow(
      'the object is in clear, this worker encrypts',
    );
    await expect(readBack([a.recipient], new ObjectKeys(undefined))).rejects.toThrow(
      'the object is encrypted, this worker writes in clear',
    );
  });
});
