/**
 * Reading age identity files as `age-keygen` writes them. A problem names
 * the setting, the path and what was wrong, never a key: the envelope's own
 * messages name a key by its file and line only.
 */
import { readFileSync, statSync } from 'node:fs';
import { AgeError, type AgeIdentity, parseIdentityFile } from '@x/age-envelope';
import type { IdentityFile } from './settings/parsed-config.ts';

/** Far more than any key file holds; a larger file is not one (a database named by mistake). */
export const MAX_IDENTITY_FILE_BYTES = 64 * 1024;

/** The file's identities, each `source` naming its path and line; none when a problem was pushed. */
export function readIdentityFile(file: IdentityFile, problems: string[]): AgeIdentity[] {
  const content = readSmallFile(file, problems);
  if (content === undefined) return [];
  try {
    return parseIdentityFile(content, file.path);
  } catch (error) {
    if (!AgeError.isInstance(error)) throw error;
    problems.push(`${file.setting}: ${error.message}${publicKeysHint(content)}`);
    return [];
  }
}

function readSmallFile(file: IdentityFile, problems: string[]): string | undefined {
  try {
    const stats = statSync(file.path);
    if (!stats.isFile()) {
      problems.push(`${file.setting}: ${file.path} is not a file`);
      return undefined;
    }
    if (stats.size > MAX_IDENTITY_FILE_BYTES) {
      problems.push(
        `${file.setting}: ${file.path} holds ${stats.size} bytes, more than an identity file (at most ${MAX_IDENTITY_FILE_BYTES})`,
      );
      return undefined;
    }
    return readFileSync(file.path, 'utf8');
  } catch (error) {
    problems.push(`${file.setting}: cannot read ${file.path} (${errnoText(error)})`);
    return undefined;
  }
}

/** `ENOENT: no such file or directory`: the code and Node's words, without the path it repeats. */
function errnoText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = 'code' in error && typeof error.code === 'string' ? error.code : undefined;
  const words = error.message.split(',')[0] ?? error.message;
  return code === undefined || words.startsWith(code) ? words : `${code}: ${words}`;
}

/** A file of public keys given as identities: say what it is and what belongs there. */
function publicKeysHint(content: string): string {
  return /^\s*age1[a-z0-9]+\s*$/m.test(content)
    ? '; it holds age1… public keys (recipients): an identity file holds the secret keys (AGE-SECRET-KEY-1…) they belong to'
    : '';
}
