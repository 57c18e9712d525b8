/**
 * The conformance cases of group `multipart`. Multipart uploads
 * (`multipartCreate`): large streamed uploads land whole, and create-if-
 * absent holds for them. A store that declares no multipart create must
 * refuse with `NotImplementedError`.
 */
import { createHash } from 'node:crypto';
import { AlreadyExistsError, NotImplementedError, sameVersion } from '@x/store';
import { check, expectRejection, text } from './assertions.ts';

import {
  asAsync,
  callOptions,
  expectText,
  key,
  MIB,
  needsMultipart,
  patternChunks,
  streamDigest,
} from './case-helpers.ts';
import type { ConformanceCase } from './case-types.ts';

export const multipart: ConformanceCase[] = [
  {
    group: 'multipart-create',
    name: 'a 20 MiB streaming upload in create mode; a second create fails with AlreadyExistsError and the first stays byte-identical',
    requires: [needsMultipart],
    async run(context) {
      const { store } = context;
      const total = 20 * MIB;
      const expectedHash = createHash('sha256');
      for (const chunk of patternChunks(total, MIB, 7)) expectedHash.update(chunk);
      const expected = expectedHash.digest('hex');
      const first = await store.upload(
        key(context, 'large'),
        asAsync(patternChunks(total, MIB, 7)),
        { ...callOptions(context), mode: 'create', partSize: 5 * MIB },
      );
      check(first.size === total, `upload reported size ${first.size}, expected ${total}`);
      await expectRejection(
        store.upload(key(context, 'large'), asAsync(patternChunks(6 * MIB, MIB, 99)), {
          ...callOptions(context),
          mode: 'create',
          partSize: 5 * MIB,
        }),
        AlreadyExistsError.isInstance,
        'AlreadyExistsError',
        'second create upload of the same key',
      );
      const info = await store.head(key(context, 'large'), callOptions(context));
      check(
        info !== null && info.size === total,
        `head reports size ${info?.size}, expected ${total}`,
      );
      check(sameVersion(info.version, first.version), 'the refused upload changed the version');
      const digest = await streamDigest(store, key(context, 'large'), context.signal);
      check(
        digest !== null && digest.size === total && digest.sha256 === expected,
        "the first upload's bytes changed or were never stored intact",
      );
    },
  },
  {
    group: 'multipart-create',
    name: 'a store that declares no multipart create refuses upload in create mode with NotImplementedError',
    requires: [{ capability: 'multipartCreate', value: false }],
    async run(context) {
      await expectRejection(
        context.store.upload(key(context, 'object'), asAsync([text('x')]), {
          ...callOptions(context),
          mode: 'create',
        }),
        NotImplementedError.isInstance,
        'NotImplementedError',
        'create upload on a store without multipart create',
      );
      await expectText(context, 'object', null, 'after a refused create upload');
    },
  },
];
