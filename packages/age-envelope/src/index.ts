export { bech32Decode, bech32Encode } from './bech32.ts';
export {
  decrypt,
  decryptStream,
  decryptSync,
  encrypt,
  encryptStream,
  encryptSync,
  type Plaintext,
} from './envelope.ts';
export { AgeError, type AgeErrorCode } from './errors.ts';
export {
  type AgeIdentity,
  type AgeRecipient,
  generateIdentity,
  parseIdentity,
  parseIdentityFile,
  parseRecipient,
  recipientFromPublicKey,
} from './keys.ts';
