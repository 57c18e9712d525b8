/**
 * The conformance cases of group `create`. Create-if-absent
 * (`conditionalPut`): exactly one of several creates wins, and a refused
 * create changes nothing. A store that declares no conditional put must
 * refuse with `NotImplementedError`.
 */
import { AlreadyExistsError, NotImplementedError, sameVersion } from '@x/store';
import { check, expectRejection, sameBytes, text } from './assertions.ts';
import { callOptions, expectText, key, needsPut } from './case-helpers.ts';
import type { ConformanceCase } from './case-types.ts';

export const create: ConformanceCase[] = [
  {
    group: 'create',
    name: 'create of a new key succeeds and get returns its bytes and version',
    requires: [needsPut],
    async run(context) {
      const written = await context.store.put(key(context, 'fresh'), text('first'), {
        ...callOptions(context),
        mode: 'create',
      });
      const read = await context.store.get(key(context, 'fresh'), callOptions(context));
      check(
        read !== null && sameBytes(read.body, text('first')),
        'created object does not read back',
      );
      check(
        sameVersion(read.version, written.version),
        'get reports another version than create returned',
      );
    },
  },
  {
    group: 'create',
    name: 'create of an existing key fails with AlreadyExistsError and keeps the first content',
    requires: [needsPut],
    async run(context) {
      const first = await context.store.put(key(context, 'once'), text('first'), {
        ...callOptions(context),
        mode: 'create',
      });
      await expectRejection(
        context.store.put(key(context, 'once'), text('second'), {
          ...callOptions(context),
          mode: 'create',
        }),
        AlreadyExistsError.isInstance,
        'AlreadyExistsError',
        'second create of the same key',
      );
      await expectText(context, 'once', 'first', 'after a refused create');
      const info = await context.store.head(key(context, 'once'), callOptions(context));
      check(
        info !== null && sameVersion(info.version, first.version),
        'a refused create changed the version',
      );
    },
  },
  {
    group: 'create',
    name: 'create succeeds again after the object is deleted',
    requires: [needsPut],
    async run(context) {
      await context.store.put(key(context, 'again'), text('first'), {
        ...callOptions(context),
        mode: 'create',
      });
      await context.store.delete(key(context, 'again'), callOptions(context));
      await context.store.put(key(context, 'again'), text('second'), {
        ...callOptions(context),
        mode: 'create',
      });
      await expectText(context, 'again', 'second', 'create after delete');
    },
  },
  {
    group: 'create',
    name: 'a store that declares no conditional put refuses create and ifMatch with NotImplementedError',
    requires: [{ capability: 'conditionalPut', value: false }],
    async run(context) {
      await context.store.put(key(context, 'object'), text('kept'), callOptions(context));
      const current = await context.store.head(key(context, 'object'), callOptions(context));
      check(current !== null, 'object missing after put');
      await expectRejection(
        context.store.put(key(context, 'object'), text('create'), {
          ...callOptions(context),
          mode: 'create',
        }),
        NotImplementedError.isInstance,
        'NotImplementedError',
        'create on a store without conditional put',
      );
      await expectRejection(
        context.store.put(key(context, 'object'), text('ifMatch'), {
          ...callOptions(context),
          mode: { ifMatch: current.version },
        }),
        NotImplementedError.isInstance,
        'NotImplementedError',
        'ifMatch on a store without conditional put',
      );
      await expectText(context, 'object', 'kept', 'after refused conditional puts');
    },
  },
];
