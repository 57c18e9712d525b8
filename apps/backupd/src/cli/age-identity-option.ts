/**
 * `--age-identity-file <file>` of restore and verify: repeatable, one path a
 * flag. A secret key given in place of the path is refused without being
 * shown back; the files are read when the command runs
 * (encryption-settings.ts, `commandLineIdentities`).
 */
import { holdsAgeSecretKey } from '../age-secret-key-text.ts';
import { AGE_IDENTITY_FILE_VARIABLE, SECRET_KEY_FOR_A_PATH } from '../settings/encryption.ts';
import { listOption } from './options.ts';
import { UsageError } from './usage-error.ts';

export const AGE_IDENTITY_FILE_OPTIONS = {
  'age-identity-file': listOption({
    argument: '<file>',
    description: `an age identity file (as age-keygen writes it) to open encrypted objects with; repeat for several (default: ${AGE_IDENTITY_FILE_VARIABLE}, comma-separated)`,
    parse: identityFilePath,
  }),
} as const;

/** @throws UsageError for a secret key where the path belongs (the key is not in the message). */
function identityFilePath(text: string, flag: string): string {
  if (holdsAgeSecretKey(text)) throw new UsageError(`${flag}: ${SECRET_KEY_FOR_A_PATH}`);
  return text;
}
