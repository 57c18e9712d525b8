/**
 * The conformance cases of group `delete`. Conditional delete
 * (`conditionalDelete`): a delete with `ifMatch` removes only the version it
 * names. A store that declares no conditional delete must refuse with
 * `NotImplementedError`.
 */
import { NotImplementedError, PreconditionFailedError } from '@x/store';
import { check, expectRejection, text } from './assertions.ts';
import { callOptions, expectText, key, needsDelete } from './case-helpers.ts';
import type { ConformanceCase } from './case-types.ts';

export const deleteCases: ConformanceCase[] = [
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
