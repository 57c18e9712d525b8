/**
 * The conformance cases of group `abort`. Abort signals: an aborted call
 * rejects with the signal's reason and leaves no partial effect.
 */
import { check, expectRejection, isAbortRejection, text } from './assertions.ts';
import { callOptions, expectText, key, MIB } from './case-helpers.ts';
import type { ConformanceCase } from './case-types.ts';

export const abort: ConformanceCase[] = [
  {
    group: 'abort',
    name: 'put with an aborted signal rejects with the abort reason and writes nothing',
    async run(context) {
      const controller = new AbortController();
      controller.abort();
      const modes = context.capabilities.conditionalPut
        ? (['overwrite', 'create'] as const)
        : (['overwrite'] as const);
      for (const mode of modes) {
        await expectRejection(
          context.store.put(key(context, `aborted-${mode}`), text('x'), {
            signal: controller.signal,
            mode,
          }),
          (error) => isAbortRejection(error, controller.signal),
          'the abort reason',
          `put (${mode}) with an aborted signal`,
        );
      }
      const listing = await context.store.list(`${context.prefix}/`, callOptions(context));
      check(listing.objects.length === 0, `aborted puts left ${listing.objects.length} object(s)`);
    },
  },
  {
    group: 'abort',
    name: 'upload aborted mid-stream rejects with the abort reason and leaves no object',
    async run(context) {
      const modes = context.capabilities.multipartCreate
        ? (['overwrite', 'create'] as const)
        : (['overwrite'] as const);
      for (const mode of modes) {
        const controller = new AbortController();
        async function* source(): AsyncIterable<Uint8Array> {
          yield new Uint8Array(MIB).fill(1);
          yield new Uint8Array(MIB).fill(2);
          controller.abort();
          yield new Uint8Array(MIB).fill(3);
          yield new Uint8Array(MIB).fill(4);
        }
        await expectRejection(
          context.store.upload(key(context, `aborted-${mode}`), source(), {
            signal: controller.signal,
            mode,
          }),
          (error) => isAbortRejection(error, controller.signal),
          'the abort reason',
          `upload (${mode}) aborted mid-stream`,
        );
        check(
          (await context.store.head(key(context, `aborted-${mode}`), callOptions(context))) ===
            null,
          `an aborted ${mode} upload left an object`,
        );
      }
      const listing = await context.store.list(`${context.prefix}/`, callOptions(context));
      check(
        listing.objects.length === 0,
        `aborted uploads left ${listing.objects.length} object(s)`,
      );
      // The key is free: a later create succeeds.
      await context.store.put(key(context, 'aborted-create'), text('later'), callOptions(context));
      await expectText(context, 'aborted-create', 'later', 'a write after an aborted upload');
    },
  },
  {
    group: 'abort',
    name: 'delete with an aborted signal rejects and keeps the object',
    async run(context) {
      await context.store.put(key(context, 'kept'), text('kept'), callOptions(context));
      const controller = new AbortController();
      controller.abort(new Error('custom abort reason'));
      await expectRejection(
        context.store.delete(key(context, 'kept'), { signal: controller.signal }),
        (error) => isAbortRejection(error, controller.signal),
        'the abort reason',
        'delete with an aborted signal',
      );
      await expectText(context, 'kept', 'kept', 'after an aborted delete');
    },
  },
];
