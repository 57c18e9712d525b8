/** Placeholder replaced by the filesystem store implementation. */
import { NotImplementedError } from './errors.ts';

export interface FsStoreOptions {
  readonly root: string;
}

export class FsStore {
  constructor(_options: FsStoreOptions) {
    throw new NotImplementedError('FsStore');
  }
}
