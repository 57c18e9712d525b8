/**
 * The conformance cases of group `replace`. Replace-if-version
 * (`conditionalPut`): a put with `ifMatch` lands only on the version it
 * names. (The refusal of a store without `conditionalPut` is checked in the
 * `create` group.)
 */
import { PreconditionFailedError, sameVersion } from '@x/store';
import { check, expectRejection, text } from './assertions.ts';
import { callOptions, expectText, key, needsDistinctVersions, needsPut } from './case-helpers.ts';
import type { ConformanceCase } from './case-types.ts';

export const replace: ConformanceCase[] = [
  {
    group: 'replace',
    name: 'update with the current version succeeds and returns a new version',
    requires: [needsPut],
    async run(context) {
      const first = await context.store.put(
        key(context, 'object'),
        text('one'),
        callOptions(context),
      );
      const second = await context.store.put(key(context, 'object'), text('two'), {
        ...callOptions(context),
        mode: { ifMatch: first.version },
      });
      check(!sameVersion(first.version, second.version), 'the update returned the old version');
      await expectText(context, 'object', 'two', 'after an update with the current version');
      const info = await context.store.head(key(context, 'object'), callOptions(context));
      check(
        info !== null && sameVersion(info.version, second.version),
        "head does not report the update's version",
      );
    },
  },
  {
    group: 'replace',
    name: 'update with a stale version fails with PreconditionFailedError and keeps the content',
    requires: [needsPut],
    async run(context) {
      const first = await context.store.put(
        key(context, 'object'),
        text('one'),
        callOptions(context),
      );
      const second = await context.store.put(
        key(context, 'object'),
        text('two'),
        callOptions(context),
      );
      await expectRejection(
        context.store.put(key(context, 'object'), text('three'), {
          ...callOptions(context),
          mode: { ifMatch: first.version },
        }),
        PreconditionFailedError.isInstance,
        'PreconditionFailedError',
        'update with a stale version',
      );
      await expectText(context, 'object', 'two', 'after a refused stale update');
      const info = await context.store.head(key(context, 'object'), callOptions(context));
      check(
        info !== null && sameVersion(info.version, second.version),
        'a refused update changed the version',
      );
    },
  },
  {
    group: 'replace',
    name: 'update of a missing key fails with PreconditionFailedError and creates nothing',
    requires: [needsPut],
    async run(context) {
      const elsewhere = await context.store.put(
        key(context, 'elsewhere'),
        text('x'),
        callOptions(context),
      );
      await expectRejection(
        context.store.put(key(context, 'missing'), text('y'), {
          ...callOptions(context),
          mode: { ifMatch: elsewhere.version },
        }),
        PreconditionFailedError.isInstance,
        'PreconditionFailedError',
        'update of a missing key',
      );
      await expectText(context, 'missing', null, 'after a refused update of a missing key');
    },
  },
  {
    group: 'replace',
    name: 'rewriting the same bytes with ifMatch yields a new version and makes the old one stale',
    requires: [needsPut, needsDistinctVersions],
    async run(context) {
      const first = await context.store.put(
        key(context, 'object'),
        text('same'),
        callOptions(context),
      );
      const second = await context.store.put(key(context, 'object'), text('same'), {
        ...callOptions(context),
        mode: { ifMatch: first.version },
      });
      check(
        !sameVersion(first.version, second.version),
        'rewriting the same bytes kept the version',
      );
      await expectRejection(
        context.store.put(key(context, 'object'), text('other'), {
          ...callOptions(context),
          mode: { ifMatch: first.version },
        }),
        PreconditionFailedError.isInstance,
        'PreconditionFailedError',
        'update with the version before a same-bytes rewrite',
      );
      await expectText(context, 'object', 'same', 'after a refused update');
    },
  },
];
