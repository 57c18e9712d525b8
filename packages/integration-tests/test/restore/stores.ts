/** The local stores every restore suite runs against. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FsStore, MemoryStore, type ObjectStore } from '@x/store';

export interface LocalStoreCase {
  readonly name: string;
  create(): Promise<{ store: ObjectStore; cleanup(): Promise<void> }>;
}

export const localStores: readonly LocalStoreCase[] = [
  {
    name: 'MemoryStore',
    async create() {
      return { store: new MemoryStore('restore-test'), async cleanup() {} };
    },
  },
  {
    name: 'FsStore',
    async create() {
      const root = await mkdtemp(join(tmpdir(), 'restore-fs-store-'));
      return {
        store: new FsStore({ root }),
        async cleanup() {
          await rm(root, { recursive: true, force: true });
        },
      };
    },
  },
];

/** A fresh temporary directory holding nothing; restore targets go inside it. */
export async function scratchDirectory(): Promise<{ path: string; cleanup(): Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), 'restore-target-'));
  return {
    path,
    async cleanup() {
      await rm(path, { recursive: true, force: true });
    },
  };
}
