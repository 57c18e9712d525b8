/**
 * The databases a directory's URL holds (`replicate --dir`), each with its
 * newest restore point: what `ls` prints for a URL with no backup of its
 * own. A database is a place below the URL that holds a `LATEST` (under a
 * local URL, its `backup/LATEST`); every other place is looked into, down
 * to {@link MAX_DEPTH} levels. One LIST per place looked into, one HEAD per
 * child, two GETs per database (`LATEST` and its manifest).
 */
import { parseManifest } from '@x/manifest';
import { readLatest } from '@x/restore';
import { FsStore, listPages, type ObjectStore } from '@x/store';
import { joinKey } from '@x/store/keys';
import { describeLocation, type StoreLocation } from '../store-url.ts';
import { directoryLayout } from './directory-layout.ts';

/** Subdirectories deeper than this are not looked into. */
export const MAX_DEPTH = 16;
/** Databases read at once. */
const PARALLEL_READS = 16;

export interface ListedDatabase {
  /** Relative to the directory's URL, `/`-separated. */
  readonly database: string;
  /** Its own URL, as displayed: what restore, ls and verify take. */
  readonly url: string;
  readonly commitSeq: number | null;
  readonly createdAt: string | null;
  readonly commitTime: string | null;
  /** Why its newest restore point could not be read; `null` when it was. */
  readonly problem: string | null;
}

/** The databases below `location` (opened as `store` with `prefix`), by relative path. */
export async function listDirectoryDatabases(
  store: ObjectStore,
  prefix: string,
  location: StoreLocation,
  signal: AbortSignal,
): Promise<ListedDatabase[]> {
  const layout = directoryLayout(location);
  // A local URL's store is rooted at its `backup/` folder's parent.
  const base = location.scheme === 'file' ? '' : prefix;
  const root = location.scheme === 'file' ? new FsStore({ root: location.root }) : store;
  const latestOf = (relative: string) =>
    location.scheme === 'file'
      ? joinKey(joinKey(relative, 'backup'), 'LATEST')
      : joinKey(joinKey(base, relative), 'LATEST');
  const found: string[] = [];
  const visit = async (relative: string, depth: number): Promise<void> => {
    const listed = relative === '' ? base : joinKey(base, relative);
    for await (const page of listPages(root, listed === '' ? '' : `${listed}/`, {
      delimiter: '/',
      signal,
    }))
      for (const child of page.commonPrefixes) {
        const name = child.slice(listed === '' ? 0 : listed.length + 1, -1);
        const childRelative = relative === '' ? name : `${relative}/${name}`;
        if ((await root.head(latestOf(childRelative), { signal })) !== null)
          found.push(childRelative);
        else if (depth < MAX_DEPTH) await visit(childRelative, depth + 1);
      }
  };
  await visit('', 0);
  const listedDatabases: ListedDatabase[] = [];
  for (let i = 0; i < found.length; i += PARALLEL_READS)
    listedDatabases.push(
      ...(await Promise.all(
        found.slice(i, i + PARALLEL_READS).map(async (relative) => {
          const placed = layout.locationOf(relative);
          if ('problem' in placed) throw new Error(placed.problem);
          const own = placed.location;
          const ownStore = own.scheme === 'file' ? new FsStore({ root: own.root }) : store;
          return newestOf(ownStore, own, relative, signal);
        }),
      )),
    );
  return listedDatabases.sort((a, b) => (a.database < b.database ? -1 : 1));
}

async function newestOf(
  store: ObjectStore,
  location: StoreLocation,
  database: string,
  signal: AbortSignal,
): Promise<ListedDatabase> {
  const url = describeLocation(location);
  const unreadable = (problem: string): ListedDatabase => ({
    database,
    url,
    commitSeq: null,
    createdAt: null,
    commitTime: null,
    problem,
  });
  const latest = await readLatest(store, location.prefix, signal);
  if (latest.state === 'missing') return unreadable('LATEST does not exist');
  if (latest.state === 'invalid') return unreadable(latest.problem);
  const object = await store.get(latest.manifestKey, { signal });
  if (object === null)
    return unreadable(`LATEST names ${latest.manifestKey}, which does not exist`);
  try {
    const manifest = parseManifest(object.body, { prefix: location.prefix });
    return {
      database,
      url,
      commitSeq: manifest.commitSeq,
      createdAt: manifest.createdAt,
      commitTime: manifest.commitTime ?? null,
      problem: null,
    };
  } catch (error) {
    return unreadable(`${latest.manifestKey}: ${(error as Error).message}`);
  }
}
