import { generateIdentity, parseIdentity, parseRecipient } from '@x/age-envelope';
import { describe, expect, it } from 'vitest';
import { ObjectKeys } from './object-keys.ts';

function operator() {
  const generated = generateIdentity();
  return {
    recipient: parseRecipient(generated.recipient),
    identity: parseIdentity(generated.identity, 'operator.key'),
  };
}

describe('ObjectKeys', () => {
  it('seals nothing without the option', () => {
    const keys = new ObjectKeys(undefined);
    expect(keys).toMatchObject({ encrypts: false, hasTenureKey: false, recipients: [] });
    expect(keys.disagreement([], 'generation 1')).toBeNull();
    expect(keys.disagreement([operator().recipient], 'generation 1')).toBe(
      'encryption changed: generation 1 is encrypted, this worker writes in clear',
    );
  });

  it('adds a tenure key of its own when no identity of a recipient is given, and opens with it', () => {
    const a = operator();
    const b = operator();
    const keys = new ObjectKeys({ recipients: [a.recipient], identities: [b.identity] });
    expect(keys.hasTenureKey).toBe(true);
    expect(keys.recipients).toHaveLength(2);
    expect(keys.recipients[0]).toBe(a.recipient);
    const tenure = keys.recipients[1]!;
    // Its identity is the tenure key's, after the configured ones.
    expect(keys.identities.map((identity) => identity.recipient.text)).toEqual([
      b.recipient.text,
      tenure.text,
    ]);
    expect(keys.disagreement([tenure, a.recipient], 'generation 2')).toBeNull();
    // Another run's tenure key: that run is gone with it.
    expect(keys.disagreement([a.recipient, operator().recipient], 'generation 2')).toBe(
      'no age identity configured: generation 2 is sealed to the key of the run that wrote it',
    );
    expect(keys.disagreement([b.recipient], 'generation 2')).toBe(
      "encryption changed: recipients differ from generation 2's",
    );
    expect(keys.disagreement([], 'generation 2')).toBe(
      'encryption changed: generation 2 is in clear, this worker encrypts',
    );
    // A new key for each worker.
    expect(new ObjectKeys({ recipients: [a.recipient] }).recipients[1]!.text).not.toBe(tenure.text);
  });

  it('with an identity of a recipient, seals to the recipients alone', () => {
    const a = operator();
    const b = operator();
    const keys = new ObjectKeys({
      recipients: [a.recipient, b.recipient],
      identities: [b.identity],
    });
    expect(keys.hasTenureKey).toBe(false);
    expect(keys.recipients).toEqual([a.recipient, b.recipient]);
    expect(keys.disagreement([b.recipient, a.recipient], 'generation 3')).toBeNull();
    expect(keys.disagreement([a.recipient], 'generation 3')).toBe(
      "encryption changed: recipients differ from generation 3's",
    );
  });
});
