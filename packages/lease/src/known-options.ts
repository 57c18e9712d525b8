/**
 * Refusing options this package does not know. TypeScript catches a
 * misspelt option only in a literal, and JavaScript callers not at all: a
 * `ttlMs: 5000` would otherwise be ignored and the lease would run with its
 * default TTL. Every public function taking an options object checks here.
 */
import { LeaseOptionsError } from './errors.ts';

/** @internal Throws {@link LeaseOptionsError} naming the first key of `options` not in `known`. */
export function refuseUnknownOptions(
  options: unknown,
  known: readonly string[],
  where: string,
): void {
  if (options === undefined) return;
  if (typeof options !== 'object' || options === null || Array.isArray(options))
    throw new LeaseOptionsError('options', `${where} takes an options object`);
  for (const name of Object.keys(options)) {
    if (known.includes(name)) continue;
    const near = known.find(
      (candidate) => candidate.slice(0, 3).toLowerCase() === name.slice(0, 3).toLowerCase(),
    );
    throw new LeaseOptionsError(
      name,
      `not an option of ${where}${near ? ` (did you mean \`${near}\`?)` : ''}; its options are ${known.join(', ')}`,
    );
  }
}
