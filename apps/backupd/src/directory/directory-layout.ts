/**
 * Where a directory's databases go: each under the URL the operator would
 * give `restore` for it alone, `<url>/<its relative path>`. On S3, Azure
 * and GCS that is the URL's prefix joined with the path, in one store for
 * all. A `file://` URL is a directory whose backup sits in its `backup/`
 * folder (and manifests name their keys whole), so each database has a
 * store of its own rooted at `<dir>/<its path>`.
 */
import { join } from 'node:path';
import { joinKey } from '@x/store/keys';
import { describeLocation, type StoreLocation } from '../store-url.ts';

export interface DirectoryLayout {
  /** The location of the URL itself: where `LATEST` would be if it held one database's backup. */
  readonly root: StoreLocation;
  /** Whether every database's location is in the root's store (else each opens its own). */
  readonly sharedStore: boolean;
  /** A database's location, or why it has none. */
  locationOf(relative: string): { readonly location: StoreLocation } | { readonly problem: string };
}

export function directoryLayout(root: StoreLocation): DirectoryLayout {
  if (root.scheme === 'file')
    return {
      root,
      sharedStore: false,
      locationOf: (relative) => {
        if (relative === root.prefix || relative.startsWith(`${root.prefix}/`))
          return {
            problem: `"${root.prefix}/" is where a file:// backup of the directory's URL itself would be`,
          };
        return { location: { ...root, root: join(root.root, ...relative.split('/')) } };
      },
    };
  return {
    root,
    sharedStore: true,
    locationOf: (relative) => ({ location: { ...root, prefix: joinKey(root.prefix, relative) } }),
  };
}

/** What identifies a location, for telling two databases' apart: its URL as displayed, with its prefix. */
export function locationIdentity(location: StoreLocation): string {
  return `${describeLocation(location)}#${location.prefix}`;
}
