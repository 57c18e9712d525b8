/**
 * The age keys of the objects this worker writes and reads back. Objects are
 * sealed to the configured recipients; when no configured identity opens
 * them, also to a key pair made here (the tenure key), held in memory only,
 * so the worker can read its own objects (compaction, a lease retaken by the
 * same process) without the operator's secret key. Its objects then open
 * for no later process but the operator's: a restart takes a new snapshot.
 */
import {
  type AgeIdentity,
  type AgeRecipient,
  generateIdentity,
  parseIdentity,
} from '@x/age-envelope';
import type { EncryptionOptions } from './worker-options.ts';

export class ObjectKeys {
  /** What every object is sealed to; empty: objects are in clear. */
  readonly recipients: readonly AgeRecipient[];
  /** What the worker opens its objects with: the configured identities, and the tenure key. */
  readonly identities: readonly AgeIdentity[];
  /** Whether the tenure key is among the recipients (no configured identity opens the objects). */
  readonly hasTenureKey: boolean;
  readonly #configured: ReadonlySet<string>;

  /** `encryption` is checked already (encryption-options.ts). */
  constructor(encryption: EncryptionOptions | undefined) {
    const configured = encryption?.recipients ?? [];
    const identities = encryption?.identities ?? [];
    this.#configured = new Set(configured.map((recipient) => recipient.text));
    const opens = identities.some((identity) => this.#configured.has(identity.recipient.text));
    this.hasTenureKey = configured.length > 0 && !opens;
    if (this.hasTenureKey) {
      const tenure = parseIdentity(generateIdentity().identity, 'the tenure key');
      this.recipients = [...configured, tenure.recipient];
      this.identities = [...identities, tenure];
    } else {
      this.recipients = [...configured];
      this.identities = [...identities];
    }
  }

  get encrypts(): boolean {
    return this.recipients.length > 0;
  }

  /**
   * Why `what` (an object, or a generation), sealed to `found` (recipients
   * from its header; none: in clear), cannot be in a generation this worker
   * writes, or `null` when it is sealed to exactly this worker's recipients.
   * A generation never mixes objects in clear and sealed ones, or two
   * recipient sets.
   */
  disagreement(found: readonly AgeRecipient[], what: string): string | null {
    const ours = new Set(this.recipients.map((recipient) => recipient.text));
    const theirs = new Set(found.map((recipient) => recipient.text));
    if (ours.size === theirs.size && [...theirs].every((text) => ours.has(text))) return null;
    if (theirs.size === 0) return `encryption changed: ${what} is in clear, this worker encrypts`;
    if (ours.size === 0)
      return `encryption changed: ${what} is encrypted, this worker writes in clear`;
    const unknown = [...theirs].filter((text) => !this.#configured.has(text));
    if (this.hasTenureKey && unknown.length === 1 && theirs.size === this.#configured.size + 1)
      return `no age identity configured: ${what} is sealed to the key of the run that wrote it`;
    return `encryption changed: recipients differ from ${what}'s`;
  }
}
