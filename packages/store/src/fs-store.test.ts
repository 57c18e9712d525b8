import { spawnSync } from 'node:child_process';
import {
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  stat,
  symlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidKeyError, StoreError } from './errors.ts';
import { FsStore } from './fs-store.ts';

const encode = (text: string) => new TextEncoder().encode(text);
const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

let sandbox = '';
let root = '';
let outside = '';

beforeEach(async () => {
  sandbox = await mkdtemp(join(tmpdir(), 'fs-store-unit-'));
  root = join(sandbox, 'root');
  outside = join(sandbox, 'outside');
  await mkdir(root);
  await mkdir(outside);
});
afterEach(async () => {
  await rm(sandbox, { recursive: true, force: true });
});

/** Every file (not directory) under `directory`, relative. */
async function filesUnder(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => !entry.isDirectory())
    .map((entry) => join(entry.parentPath, entry.name).slice(directory.length + 1))
    .sort();
}

describe('FsStore keys and containment', () => {
  const hostile = [
    '../escape',
    'a/../../escape',
    '/absolute',
    'a//b',
    'a/./b',
    'a/..',
    'nul\u0000byte',
    'back\\slash',
    'trailing/',
    `${'x'.repeat(251)}`,
    `${'~'.repeat(84)}`, // 84 × "~7e" = 252 bytes once escaped
  ];
  for (const key of hostile) {
    it(`refuses the key ${JSON.stringify(key.length > 40 ? `${key.slice(0, 12)}…(${key.length})` : key)} for every operation and writes nothing`, async () => {
      const store = new FsStore({ root });
      await expect(store.put(key, encode('x'))).rejects.toSatisfy(InvalidKeyError.isInstance);
      await expect(store.upload(key, encode('x'))).rejects.toSatisfy(InvalidKeyError.isInstance);
      await expect(store.get(key)).rejects.toSatisfy(InvalidKeyError.isInstance);
      await expect(store.head(key)).rejects.toSatisfy(InvalidKeyError.isInstance);
      await expect(store.delete(key)).rejects.toSatisfy(InvalidKeyError.isInstance);
      expect(await readdir(sandbox)).toEqual(['outside', 'root']);
      expect(await filesUnder(root)).toEqual([]);
      expect(await filesUnder(outside)).toEqual([]);
    });
  }

  it('accepts a 250-byte segment, the longest a filesystem name allows with its suffix', async () => {
    const store = new FsStore({ root });
    const key = `dir/${'y'.repeat(250)}`;
    await store.put(key, encode('long'));
    expect(decode((await store.get(key))!.body)).toBe('long');
  });

  it('refuses to read, write, delete or list through a directory symlink pointing outside the root', async () => {
    const elsewhere = new FsStore({ root: outside });
    await elsewhere.put('secret', encode('outside secret'));
    await symlink(outside, join(root, 'link'));
    const store = new FsStore({ root });
    await expect(store.get('link/secret')).rejects.toSatisfy(StoreError.isInstance);
    await expect(store.head('link/secret')).rejects.toThrow(/symbolic link/);
    await expect(store.put('link/planted', encode('x'))).rejects.toThrow(/symbolic link/);
    await expect(store.put('link/secret', encode('x'), { mode: 'create' })).rejects.toThrow(
      /symbolic link/,
    );
    await expect(store.delete('link/secret')).rejects.toThrow(/symbolic link/);
    await expect(store.upload('link/deep/new', encode('x'))).rejects.toThrow(/symbolic link/);
    expect((await store.list('')).objects).toEqual([]);
    expect((await store.list('link/')).objects).toEqual([]);
    expect(await filesUnder(outside)).toEqual(['secret~obj']);
    expect(decode((await elsewhere.get('secret'))!.body)).toBe('outside secret');
  });

  it('refuses an object file that is a symlink to a file outside the root, and never writes through it', async () => {
    const elsewhere = new FsStore({ root: outside });
    await elsewhere.put('secret', encode('outside secret'));
    await symlink(join(outside, 'secret~obj'), join(root, 'evil~obj'));
    const store = new FsStore({ root });
    await expect(store.get('evil')).rejects.toThrow(/symbolic link/);
    await expect(store.getStream('evil')).rejects.toThrow(/symbolic link/);
    await expect(store.head('evil')).rejects.toThrow(/symbolic link/);
    await expect(store.delete('evil', { ifMatch: { etag: '"x"' } })).rejects.toThrow(
      /symbolic link/,
    );
    await expect(
      store.put('evil', encode('x'), { mode: { ifMatch: { etag: '"x"' } } }),
    ).rejects.toThrow(/symbolic link/);
    // A create finds the name taken; an overwrite replaces the link itself, not its target.
    await expect(store.put('evil', encode('x'), { mode: 'create' })).rejects.toThrow(
      /already exists/,
    );
    expect((await store.list('')).objects).toEqual([]);
    await store.put('evil', encode('replaced'));
    expect(decode((await store.get('evil'))!.body)).toBe('replaced');
    expect(decode((await elsewhere.get('secret'))!.body)).toBe('outside secret');
  });

  it('lets key "a" and key "a/b" exist side by side and escapes "~" in names', async () => {
    const store = new FsStore({ root });
    await store.put('a', encode('parent'));
    await store.put('a/b', encode('child'));
    await store.put('t~obj/x~lock', encode('tilde'));
    expect((await store.list('')).objects.map((info) => info.key)).toEqual([
      'a',
      'a/b',
      't~obj/x~lock',
    ]);
    expect(await filesUnder(root)).toEqual(['a/b~obj', 'a~obj', 't~7eobj/x~7elock~obj']);
    expect(decode((await store.get('a'))!.body)).toBe('parent');
  });
});

describe('FsStore files', () => {
  it('stores a 64-byte header holding the version, then the bytes', async () => {
    const store = new FsStore({ root });
    const { version } = await store.put('k', encode('payload'));
    const raw = await readFile(join(root, 'k~obj'));
    expect(raw.byteLength).toBe(64 + 7);
    expect(raw.subarray(64).toString()).toBe('payload');
    expect(version.etag).toBe(`"${raw.subarray(16, 48).toString()}"`);
  });

  it('never lists temp, lock, displaced-lock or foreign files', async () => {
    const store = new FsStore({ root });
    await store.put('dir/real', encode('x'));
    for (const name of [
      '~tmp.abc',
      'real~lock',
      '~stale.abc',
      'foreign',
      'odd~name~obj',
      'x~7q~obj',
    ])
      await writeFile(join(root, 'dir', name), 'junk');
    await writeFile(join(root, '~tmp.top'), 'junk');
    await mkdir(join(root, 'dir', 'odd~dir'));
    await writeFile(join(root, 'dir', 'odd~dir', 'inside~obj'), 'junk');
    const listing = await store.list('');
    expect(listing.objects.map((info) => info.key)).toEqual(['dir/real']);
    expect((await store.list('dir/', { delimiter: '/' })).commonPrefixes).toEqual([]);
  });

  it('does not list an upload in progress and shows it whole once complete', async () => {
    const store = new FsStore({ root });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let firstWritten!: () => void;
    const started = new Promise<void>((resolve) => {
      firstWritten = resolve;
    });
    async function* source(): AsyncIterable<Uint8Array> {
      yield new Uint8Array(1024).fill(1);
      firstWritten();
      await gate;
      yield new Uint8Array(1024).fill(2);
    }
    const upload = store.upload('big', source());
    await started;
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await filesUnder(root)).some((name) => name.startsWith('~tmp.'))).toBe(true);
    expect((await store.list('')).objects).toEqual([]);
    expect(await store.get('big')).toBeNull();
    release();
    await upload;
    expect((await store.get('big'))!.size).toBe(2048);
    expect(await filesUnder(root)).toEqual(['big~obj']);
  });

  it('an aborted upload rejects with the reason and leaves no object and no temp file', async () => {
    const store = new FsStore({ root });
    const controller = new AbortController();
    const reason = new Error('stop now');
    async function* source(): AsyncIterable<Uint8Array> {
      yield new Uint8Array(4096).fill(1);
      controller.abort(reason);
      yield new Uint8Array(4096).fill(2);
    }
    await expect(
      store.upload('deep/path/aborted', source(), { signal: controller.signal, mode: 'create' }),
    ).rejects.toBe(reason);
    await expect(store.put('other', encode('x'), { signal: controller.signal })).rejects.toBe(
      reason,
    );
    expect(await filesUnder(root)).toEqual([]);
    // The key is free afterwards.
    await store.upload('deep/path/aborted', encode('later'), { mode: 'create' });
    expect(decode((await store.get('deep/path/aborted'))!.body)).toBe('later');
  });

  it('a failing source leaves no temp file and the old object intact', async () => {
    const store = new FsStore({ root });
    await store.put('k', encode('old'));
    async function* source(): AsyncIterable<Uint8Array> {
      yield encode('new');
      throw new Error('source broke');
    }
    await expect(store.upload('k', source())).rejects.toThrow(/source broke|filesystem error/);
    expect(decode((await store.get('k'))!.body)).toBe('old');
    expect(await filesUnder(root)).toEqual(['k~obj']);
  });

  it('readers see whole objects only while writers replace them', async () => {
    const store = new FsStore({ root, fsync: false });
    const size = 256 * 1024;
    await store.put('k', new Uint8Array(size).fill(0));
    let writing = true;
    const writer = (async () => {
      for (let round = 1; round <= 30; round++)
        await store.put('k', new Uint8Array(size).fill(round));
      writing = false;
    })();
    let reads = 0;
    while (writing) {
      const read = await store.get('k');
      expect(read!.size).toBe(size);
      expect(read!.body.every((byte) => byte === read!.body[0])).toBe(true);
      reads++;
    }
    await writer;
    expect(reads).toBeGreaterThan(0);
  });

  it('removes emptied directories after a delete and keeps non-empty ones', async () => {
    const store = new FsStore({ root });
    await store.put('a/b/c/d', encode('1'));
    await store.put('a/x', encode('2'));
    await store.delete('a/b/c/d');
    expect(await readdir(join(root, 'a'))).toEqual(['x~obj']);
    await store.delete('a/x');
    expect(await readdir(root)).toEqual([]);
  });

  it('reports a corrupt object file as a StoreError', async () => {
    const store = new FsStore({ root });
    await writeFile(join(root, 'bad~obj'), 'no header here');
    await expect(store.get('bad')).rejects.toThrow(/bad header/);
  });

  it('lists nothing when the root does not exist yet, and creates it on the first write', async () => {
    const store = new FsStore({ root: join(sandbox, 'later') });
    expect(await store.list('')).toEqual({ objects: [], commonPrefixes: [] });
    expect(await store.get('k')).toBeNull();
    await store.delete('k');
    await store.put('k', encode('x'));
    expect((await stat(join(sandbox, 'later'))).isDirectory()).toBe(true);
  });
});

describe('FsStore locks', () => {
  function deadPid(): number {
    const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
    return Number(child.stdout.toString());
  }

  it('breaks a lock left by a dead process on this host at once', async () => {
    const store = new FsStore({ root });
    await store.put('k', encode('old'));
    const record = { pid: deadPid(), host: hostname(), nonce: 'dead', createdAt: Date.now() };
    await writeFile(join(root, 'k~lock'), JSON.stringify(record));
    const { version } = await store.put('k', encode('new'), {
      signal: AbortSignal.timeout(5_000),
    });
    expect((await store.head('k'))!.version).toEqual(version);
    expect(await filesUnder(root)).toEqual(['k~obj']);
  });

  it('waits on a live lock until the signal fires, changing nothing', async () => {
    const store = new FsStore({ root });
    await store.put('k', encode('old'));
    const record = { pid: process.ppid, host: hostname(), nonce: 'live', createdAt: Date.now() };
    await writeFile(join(root, 'k~lock'), JSON.stringify(record));
    await expect(
      store.put('k', encode('new'), { signal: AbortSignal.timeout(150) }),
    ).rejects.toMatchObject({ name: 'TimeoutError' });
    await expect(store.delete('k', { signal: AbortSignal.timeout(100) })).rejects.toMatchObject({
      name: 'TimeoutError',
    });
    expect(decode((await store.get('k'))!.body)).toBe('old');
    expect(await filesUnder(root)).toEqual(['k~lock', 'k~obj']);
  });

  it('breaks a lock older than staleLockMs even when its holder cannot be checked', async () => {
    const store = new FsStore({ root, staleLockMs: 1_000 });
    await store.put('k', encode('old'));
    const lockPath = join(root, 'k~lock');
    await writeFile(
      lockPath,
      JSON.stringify({ pid: 1, host: 'another-host', nonce: 'far', createdAt: 0 }),
    );
    const past = new Date(Date.now() - 60_000);
    await utimes(lockPath, past, past);
    await store.put('k', encode('new'), { signal: AbortSignal.timeout(5_000) });
    expect(decode((await store.get('k'))!.body)).toBe('new');
    expect(await filesUnder(root)).toEqual(['k~obj']);
  });
});
