/**
 * Crash at every write: for n = 0, 1, 2, … a worker killed after n bucket
 * writes leaves a bucket in which every manifest verifies and LATEST names
 * one of them; a new worker then resumes and completes, and LATEST's restore
 * point is the source at that commit. The loop ends at the first n whose run
 * completes. Local stores run every n; real servers a bounded sample (see
 * real-servers.test.ts). Encrypted, once more on one store: the same, with
 * every object but manifests, LATEST and the lease sealed, archives and side
 * files included.
 */
import { generateIdentity, parseIdentity, parseRecipient } from '@x/age-envelope';
import { parseKey } from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { readSegmentObjectHeader } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import { crashAt } from './helpers/scenario.ts';
import { localStoreCases } from './helpers/stores.ts';

for (const storeCase of localStoreCases()) {
  describe(`crash at every write (${storeCase.name})`, () => {
    it('leaves a verifying bucket after a kill at every write, and a new worker completes', async () => {
      let n = 0;
      for (; n < 500; n += 1) {
        if ((await crashAt(storeCase, n)) === 'completed') break;
      }
      // The loop crashed at many distinct writes before a run completed: it
      // cannot pass vacuously.
      expect(n).toBeGreaterThan(20);
      expect(n).toBeLessThan(500);
    });
  });
}

const operator = generateIdentity();
const encryption = {
  recipients: [parseRecipient(operator.recipient)],
  identities: [parseIdentity(operator.identity, 'operator key')],
};

/** What the runs' buckets held, by kind (side files by name). */
const seen = new Set<string>();

/** Every content object is sealed to the operator: snapshots, segments, archives, chain and side files. */
async function expectSealed(store: ObjectStore, prefix: string): Promise<void> {
  for (const { key } of (await store.list(`${prefix}/`)).objects) {
    const parsed = parseKey(prefix, key);
    if (parsed === undefined || parsed.kind === 'latest' || parsed.kind === 'manifest') continue;
    const body = (await store.get(key))!.body;
    const header = readSegmentObjectHeader(body);
    expect(header.encryption, key).toBe('age-x25519');
    expect(header.recipients.map((recipient) => recipient.text)).toEqual([operator.recipient]);
    if (parsed.kind === 'archive' || parsed.kind === 'side') {
      expect(parsed.layout, key).toBe('object');
      expect(header.kind, key).toBe('file');
    }
    // No frame or side file of the test engine in clear.
    for (const text of ['commit-', 'roles', 'genesis-'])
      expect(Buffer.from(body).includes(text), `${key} holds ${text}`).toBe(false);
    seen.add(parsed.kind === 'side' ? `side ${parsed.name}` : parsed.kind);
  }
}

describe('crash at every write, encrypted (MemoryStore)', () => {
  it('leaves a verifying bucket after a kill at every write, every content object sealed', async () => {
    const storeCase = localStoreCases()[0]!;
    let n = 0;
    for (; n < 500; n += 1) {
      const outcome = await crashAt(storeCase, n, { encryption, inspect: expectSealed });
      if (outcome === 'completed') break;
    }
    expect(n).toBeGreaterThan(20);
    expect(n).toBeLessThan(500);
    // Runs cut at different steps left each kind of object in the bucket:
    // none of them passed unchecked.
    expect([...seen].sort()).toEqual(
      expect.arrayContaining([
        'archive',
        'segment',
        'side roles.json',
        'side wal.floor',
        'side wal.genesis',
        'snapshot',
      ]),
    );
  });
});
