/** Kind 4, a whole file: what an encrypted backup stores its archives, chain and side files as. */
import { generateIdentity, parseIdentity, parseRecipient } from '@x/age-envelope';
import { describe, expect, it } from 'vitest';
import {
  decodeSegmentObject,
  encodeSegmentObject,
  readSegmentObjectHeader,
  type SegmentObjectFields,
} from './segment-object.ts';
import { decodeSegmentObjectStream } from './segment-object-stream.ts';

const ROLES = new TextEncoder().encode('{"roles":["reader"]}');

function fileFields(length: number, extra: Partial<SegmentObjectFields> = {}): SegmentObjectFields {
  return {
    codec: 'zstd',
    kind: 'file',
    generation: 0,
    start: 0,
    end: length,
    commits: 0,
    previousCrc32: 0,
    lineage: 'lin-1',
    ...extra,
  };
}

async function collect(stream: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return new Uint8Array(Buffer.concat(chunks));
}

describe('a file object (kind 4)', () => {
  it('stores kind 4 and round-trips, in clear and sealed, whole and streamed', async () => {
    const clear = encodeSegmentObject(ROLES, fileFields(ROLES.length));
    expect(clear[9]).toBe(4);
    expect(decodeSegmentObject(clear).header).toMatchObject({ kind: 'file', start: 0, end: 20 });
    expect(Buffer.from(decodeSegmentObject(clear).body).toString()).toBe('{"roles":["reader"]}');

    const key = generateIdentity();
    const identities = [parseIdentity(key.identity, 'test key')];
    const sealed = encodeSegmentObject(ROLES, fileFields(ROLES.length, { commits: 3 }), {
      recipients: [parseRecipient(key.recipient)],
    });
    const header = readSegmentObjectHeader(sealed);
    expect(header).toMatchObject({ kind: 'file', encryption: 'age-x25519', bodyCrc32: 0 });
    expect(Buffer.from(decodeSegmentObject(sealed, { identities }).body)).toEqual(
      Buffer.from(ROLES),
    );
    const streamed = await decodeSegmentObjectStream(
      (async function* () {
        yield sealed;
      })(),
      { identities },
    );
    expect(Buffer.from(await collect(streamed.body))).toEqual(Buffer.from(ROLES));
  });

  it('may be empty, as a file may', () => {
    const empty = encodeSegmentObject(new Uint8Array(0), fileFields(0));
    expect(decodeSegmentObject(empty).body.byteLength).toBe(0);
  });

  it('starts at 0 and chains to nothing', () => {
    expect(() =>
      encodeSegmentObject(ROLES, fileFields(ROLES.length, { start: 1, end: 21 })),
    ).toThrow(/start: not 0 for a file/);
    expect(() =>
      encodeSegmentObject(ROLES, fileFields(ROLES.length, { previousCrc32: 1 })),
    ).toThrow(/previousCrc32: not 0 for a file/);
  });
});
