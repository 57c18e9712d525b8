/**
 * Whether an envelope already in the bucket holds what this worker meant to
 * store under its key: a sealed envelope is other bytes at every encoding
 * (a fresh file key), so a PUT retried after a lost answer cannot compare
 * CRCs. Same header fields, same recipients, same decoded body: the same
 * object as far as any restore can tell.
 */
import type { AgeIdentity, AgeRecipient } from '@x/age-envelope';
import {
  decodeSegmentObject,
  readSegmentObjectHeader,
  segmentObjectFieldsOf,
} from '@x/wal-segment';

export function sameEnvelopeContent(
  intended: Uint8Array,
  body: Uint8Array,
  identities: readonly AgeIdentity[],
): (existing: Uint8Array) => boolean {
  return (existing) => {
    try {
      const ours = readSegmentObjectHeader(intended);
      const found = decodeSegmentObject(existing, { identities });
      return (
        JSON.stringify(segmentObjectFieldsOf(found.header)) ===
          JSON.stringify(segmentObjectFieldsOf(ours)) &&
        sameTexts(found.header.recipients, ours.recipients) &&
        Buffer.from(found.body).equals(body)
      );
    } catch {
      // Not an envelope this worker can open: another writer's object.
      return false;
    }
  };
}

function sameTexts(a: readonly AgeRecipient[], b: readonly AgeRecipient[]): boolean {
  const texts = new Set(a.map((recipient) => recipient.text));
  return a.length === b.length && b.every((recipient) => texts.has(recipient.text));
}
