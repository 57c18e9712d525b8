/**
 * Key-rule cases (group `basics`): every store refuses the keys `@x/store`'s
 * rules refuse (`keys.ts`), with `InvalidKeyError`, before writing anything,
 * so a key accepted by one backend is accepted by all and none can name a
 * path outside a store's root.
 */
import { InvalidKeyError, MAX_KEY_BYTES, type ObjectStore } from '@x/store';
import { check, describeError, text } from './assertions.ts';
import { asAsync, callOptions } from './case-helpers.ts';
import type { CaseContext, ConformanceCase } from './case-types.ts';

/** Invalid keys, each with the rule it breaks; all but two are under the case's prefix. */
function invalidKeys(prefix: string): [key: string, rule: string][] {
  return [
    ['', 'the empty key'],
    [`/${prefix}/absolute`, 'a leading "/"'],
    [`${prefix}/a//b`, 'an empty segment'],
    [`${prefix}/trailing/`, 'a trailing "/"'],
    [`${prefix}/./dot`, 'a "." segment'],
    [`${prefix}/up/../escape`, 'a ".." segment'],
    [`${prefix}/back\\slash`, 'a backslash'],
    [`${prefix}/nul\u0000byte`, 'NUL'],
    [`${prefix}/tab\tcontrol`, 'a control character'],
    [`${prefix}/del\u007fcontrol`, 'DEL'],
    [`${prefix}/lone\ud800surrogate`, 'a lone surrogate'],
    [`${prefix}/${'k'.repeat(MAX_KEY_BYTES)}`, `more than ${MAX_KEY_BYTES} bytes`],
  ];
}

async function refusal(attempt: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await attempt();
    return 'accepted';
  } catch (error) {
    return InvalidKeyError.isInstance(error) ? undefined : `threw ${describeError(error)}`;
  }
}

function shown(key: string): string {
  const short = key.length > 60 ? `${key.slice(0, 40)}…(${key.length} characters)` : key;
  return JSON.stringify(short);
}

/** Best effort: remove what a store that accepted an invalid key may have written. */
async function forget(store: ObjectStore, key: string, context: CaseContext): Promise<void> {
  try {
    await store.delete(key, callOptions(context));
  } catch {
    // The failure being reported is that the write was accepted.
  }
}

export const keyCases: ConformanceCase[] = [
  {
    group: 'basics',
    name: 'put and upload refuse invalid keys with InvalidKeyError and write nothing',
    async run(context) {
      const { store } = context;
      const problems: string[] = [];
      for (const [invalid, rule] of invalidKeys(context.prefix)) {
        const put = await refusal(() => store.put(invalid, text('x'), callOptions(context)));
        if (put === 'accepted') await forget(store, invalid, context);
        if (put) problems.push(`put of ${shown(invalid)} (${rule}) ${put}`);
        const upload = await refusal(() =>
          store.upload(invalid, asAsync([text('x')]), callOptions(context)),
        );
        if (upload === 'accepted') await forget(store, invalid, context);
        if (upload) problems.push(`upload of ${shown(invalid)} (${rule}) ${upload}`);
      }
      check(
        problems.length === 0,
        `expected InvalidKeyError: ${problems.slice(0, 6).join('; ')}${problems.length > 6 ? `; and ${problems.length - 6} more` : ''}`,
      );
    },
  },
  {
    group: 'basics',
    name: 'get, getStream, head and delete refuse invalid keys with InvalidKeyError',
    async run(context) {
      const { store } = context;
      const problems: string[] = [];
      for (const [invalid, rule] of invalidKeys(context.prefix)) {
        for (const [operation, attempt] of [
          ['get', () => store.get(invalid, callOptions(context))],
          ['getStream', () => store.getStream(invalid, callOptions(context))],
          ['head', () => store.head(invalid, callOptions(context))],
          ['delete', () => store.delete(invalid, callOptions(context))],
        ] as const) {
          const problem = await refusal(attempt);
          if (problem) problems.push(`${operation} of ${shown(invalid)} (${rule}) ${problem}`);
        }
      }
      check(
        problems.length === 0,
        `expected InvalidKeyError: ${problems.slice(0, 6).join('; ')}${problems.length > 6 ? `; and ${problems.length - 6} more` : ''}`,
      );
    },
  },
];
