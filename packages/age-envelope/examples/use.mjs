import { decrypt, encrypt, generateIdentity, parseIdentity, parseRecipient } from '@x/age-envelope';

const { identity, recipient } = generateIdentity();
const sealed = await encrypt(new TextEncoder().encode('page bytes'), [parseRecipient(recipient)]);
const opened = await decrypt(sealed, [parseIdentity(identity)]);
console.log(new TextDecoder().decode(opened));
