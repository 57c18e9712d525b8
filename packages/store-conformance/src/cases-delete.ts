/**
 * The conformance cases of group `delete`. Conditional delete
 * (`conditionalDelete`): a delete with `ifMatch` removes only the version it
 * names. A store that declares no conditional delete must refuse with
 * `NotImplementedError`. Deleting many keys (`deleteKeys`, the store's
 * `deleteMany` where it has one): every key given goes, a missing key is no
 * failure, nothing else is touched.
 */
import { deleteKeys, NotImplementedError, PreconditionFailedError } from '@x/store';
import { check, expectRejection, text } from './assertions.ts';
import { callOptions, expectText, key, needsDelete } from './case-helpers.ts';
import type { ConformanceCase } from './case-types.ts';

/** More than one batch of Azure's (256), with names that need escaping in XML and URLs. */
const MANY_KEYS = 300;
const manyName = (index: number) => `many/a b&c<d>'é%2F=+/${String(index).padStart(3, '0')}`;

export const deleteCases: ConformanceCase[] = [
  {
    group: 'delete',
    name: `deleting ${MANY_KEYS} keys at once removes each one, counts a missing key as deleted and keeps every other key`,
    async run(context) {
      const names = Array.from({ length: MANY_KEYS }, (_, index) => manyName(index));
      const kept = new Set(names.filter((_, index) => index % 30 === 7));
      const body = text('x');
      for (let start = 0; start < names.length; start += 25) {
        await Promise.all(
          names
            .slice(start, start + 25)
            .map((name) => context.store.put(key(context, name), body, callOptions(context))),
        );
      }
      const doomed = names.filter((name) => !kept.has(name));
      const missing = [key(context, 'many/never-written'), key(context, 'many/also-absent')];
      const result = await deleteKeys(
        context.store,
        [...doomed.map((name) => key(context, name)), ...missing],
        callOptions(context),
      );
      check(
        result.failed.length === 0,
        `deleteMany reported failures: ${result.failed
          .slice(0, 3)
          .map((failure) => `${failure.key}: ${failure.error.message}`)
          .join('; ')}`,
      );
      const left = (await context.store.list(key(context, 'many/'), callOptions(context))).objects
        .map((info) => info.key)
        .sort();
      const expected = [...kept].map((name) => key(context, name)).sort();
      check(
        JSON.stringify(left) === JSON.stringify(expected),
        `after deleting ${doomed.length} keys, ${left.length} remain where ${expected.length} were kept (first unexpected: ${left.find((found) => !expected.includes(found)) ?? expected.find((wanted) => !left.includes(wanted))})`,
      );
    },
  },
  {
    group: 'delete',
    name: 'conditional delete with the current version removes the object',
    requires: [needsDelete],
    async run(context) {
      const written = await context.store.put(
        key(context, 'object'),
        text('x'),
        callOptions(context),
      );
      await context.store.delete(key(context, 'object'), {
        ...callOptions(context),
        ifMatch: written.version,
      });
      check(
        (await context.store.head(key(context, 'object'), callOptions(context))) === null,
        'object still there after a conditional delete with the current version',
      );
    },
  },
  {
    group: 'delete',
    name: 'conditional delete with a stale version fails with PreconditionFailedError and keeps the object',
    requires: [needsDelete],
    async run(context) {
      const first = await context.store.put(
        key(context, 'object'),
        text('one'),
        callOptions(context),
      );
      await context.store.put(key(context, 'object'), text('two'), callOptions(context));
      await expectRejection(
        context.store.delete(key(context, 'object'), {
          ...callOptions(context),
          ifMatch: first.version,
        }),
        PreconditionFailedError.isInstance,
        'PreconditionFailedError',
        'delete with a stale version',
      );
      await expectText(context, 'object', 'two', 'after a refused conditional delete');
    },
  },
  {
    group: 'delete',
    name: 'conditional delete of a missing key fails with PreconditionFailedError',
    requires: [needsDelete],
    async run(context) {
      const written = await context.store.put(
        key(context, 'object'),
        text('x'),
        callOptions(context),
      );
      await context.store.delete(key(context, 'object'), callOptions(context));
      await expectRejection(
        context.store.delete(key(context, 'object'), {
          ...callOptions(context),
          ifMatch: written.version,
        }),
        PreconditionFailedError.isInstance,
        'PreconditionFailedError',
        'conditional delete of a missing key',
      );
    },
  },
  {
    group: 'delete',
    name: 'a store that declares no conditional delete refuses ifMatch with NotImplementedError and deletes nothing',
    requires: [{ capability: 'conditionalDelete', value: false }],
    async run(context) {
      const written = await context.store.put(
        key(context, 'object'),
        text('kept'),
        callOptions(context),
      );
      await expectRejection(
        context.store.delete(key(context, 'object'), {
          ...callOptions(context),
          ifMatch: written.version,
        }),
        NotImplementedError.isInstance,
        'NotImplementedError',
        'conditional delete on a store without conditional delete',
      );
      await expectText(context, 'object', 'kept', 'after a refused conditional delete');
    },
  },
];
