/** The suite, run against the reference stores of @x/store (MemoryStore, FsStore, PrefixedStore). */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FsStore, MemoryStore, PrefixedStore } from '@x/store';
import { describeStoreConformance } from '../src/vitest.ts';

describeStoreConformance('MemoryStore', { createStore: () => new MemoryStore() });

// Versions as S3 gives them (content hashes): the same-bytes cases skip, with the reason.
describeStoreConformance('MemoryStore with content-hash versions', {
  createStore: () => new MemoryStore('s3-like', { versions: 'content-hash' }),
});

let fsRoot = '';
describeStoreConformance('FsStore', {
  createStore: async () => {
    fsRoot = await mkdtemp(join(tmpdir(), 'fs-store-conformance-'));
    return new FsStore({ root: fsRoot });
  },
  disposeStore: () => rm(fsRoot, { recursive: true, force: true }),
});

describeStoreConformance('PrefixedStore over MemoryStore', {
  createStore: () => new PrefixedStore(new MemoryStore(), 'tenant/one'),
});
