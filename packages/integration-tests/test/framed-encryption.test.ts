/**
 * A framed store directory backed up with `encryption`: its snapshot,
 * segments, archives, chain and side files are all sealed (archives and side
 * files as whole-file envelopes under `.bko` keys, a side key naming the
 * stored bytes, not the file's CRC-32); restore, `verify --deep` and `ls`
 * open them with the identity; without it a restore is refused before
 * anything is written; a sealed archive or side file replaced by one in
 * clear is refused; a restart reuses sealed archives and side files only
 * when they are sealed to exactly its recipients.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateIdentity, parseIdentity, parseRecipient } from '@x/age-envelope';
import { BackupWorker, type EncryptionOptions } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import {
  archiveKey,
  crc32Hex,
  type FileEntry,
  latestKey,
  type Manifest,
  parseArchiveKey,
  parseKey,
  parseLatest,
  parseManifest,
  parseSideKey,
  serializeManifest,
  sideKey,
  sideObjectKey,
} from '@x/manifest';
import { listRestorePoints, ObjectEncodingError, ObjectKeyError, verify } from '@x/restore';
import { FramedDirSource, restoreFramedStore } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { decodeSegmentObject, encodeSegmentObject, readSegmentObjectHeader } from '@x/wal-segment';
import { afterEach, describe, expect, it } from 'vitest';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { expectRestoreEqualsSource } from './helpers/scenario.ts';

const PREFIX = 'enc/framed';

function keyPair(name: string) {
  const pair = generateIdentity();
  return {
    recipient: parseRecipient(pair.recipient),
    identity: parseIdentity(pair.identity, name),
  };
}

const operator = keyPair('operator key');
const other = keyPair('other key');
const sealedTo = (key: ReturnType<typeof keyPair>): EncryptionOptions => ({
  recipients: [key.recipient],
  identities: [key.identity],
});

const directories: string[] = [];
afterEach(async () => {
  for (const directory of directories.splice(0))
    await rm(directory, { recursive: true, force: true });
});

async function tempDirectory(name: string): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), `framed-encryption-${name}-`));
  directories.push(directory);
  return directory;
}

function worker(store: MemoryStore, engine: FramedTestEngine, encryption?: EncryptionOptions) {
  return new BackupWorker({
    store,
    prefix: PREFIX,
    source: new FramedDirSource({ directory: engine.directory, engine }),
    clock: new FakeClock(),
    manifestIntervalMs: 0,
    compactionLevels: [],
    ...(encryption === undefined ? {} : { encryption }),
  });
}

/** A store with an archive, chain files and side files, backed up with `encryption`. */
async function backedUp(encryption: EncryptionOptions = sealedTo(operator)) {
  const engine = await FramedTestEngine.create(await tempDirectory('source'));
  const store = new MemoryStore();
  await engine.commit(2);
  await engine.snapshot();
  await engine.commit(3);
  await worker(store, engine, encryption).runOnce();
  await engine.setRoles('{"roles":["reader"]}');
  await engine.commit(1);
  await worker(store, engine, encryption).runOnce();
  return { engine, store };
}

async function latestManifest(store: MemoryStore): Promise<{ key: string; manifest: Manifest }> {
  const key = parseLatest((await store.get(latestKey(PREFIX)))!.body, { prefix: PREFIX });
  return { key, manifest: parseManifest((await store.get(key))!.body, { prefix: PREFIX }) };
}

async function rewriteLatest(store: MemoryStore, edit: (files: FileEntry[]) => void) {
  const { key, manifest } = await latestManifest(store);
  const files = manifest.files.map((file) => ({ ...file }));
  edit(files);
  await store.put(
    key,
    new TextEncoder().encode(serializeManifest({ ...manifest, files }, { prefix: PREFIX })),
  );
}

describe('a framed store backed up with encryption', () => {
  it('seals every content object: archives and side files under .bko keys that do not name the file’s CRC-32', async () => {
    const { engine, store } = await backedUp();
    const kinds = new Set<string>();
    for (const { key } of (await store.list(`${PREFIX}/`)).objects) {
      const parsed = parseKey(PREFIX, key);
      if (parsed === undefined || parsed.kind === 'latest' || parsed.kind === 'manifest') continue;
      const header = readSegmentObjectHeader((await store.get(key))!.body);
      expect(header.encryption, key).toBe('age-x25519');
      if (parsed.kind === 'archive' || parsed.kind === 'side') {
        expect(parsed.layout, key).toBe('object');
        expect(header.kind, key).toBe('file');
      }
      kinds.add(parsed.kind);
    }
    expect([...kinds].sort()).toEqual(['archive', 'segment', 'side', 'snapshot']);
    const { manifest } = await latestManifest(store);
    const roles = manifest.files.find((file) => file.name === 'roles.json')!;
    const local = await readFile(join(engine.directory, 'roles.json'));
    expect(parseSideKey(PREFIX, roles.key)?.crc32).not.toBe(crc32Hex(local));
    expect(roles.key).not.toContain(crc32Hex(local));
    const archive = manifest.files.find((file) => file.name === 'wal.1.archive')!;
    expect(parseArchiveKey(PREFIX, archive.key)?.layout).toBe('object');
    const opened = decodeSegmentObject((await store.get(archive.key))!.body, {
      identities: [operator.identity],
    });
    expect(Buffer.from(opened.body)).toEqual(
      await readFile(join(engine.directory, 'wal.1.archive')),
    );
    expect(opened.header.commits).toBe(archive.frames);
  });

  it('restores file for file with the identity; verify --deep and ls open it too', async () => {
    const { engine, store } = await backedUp();
    const { key } = await latestManifest(store);
    await expectRestoreEqualsSource(store, PREFIX, engine, key, {
      identities: [operator.identity],
    });
    const report = await verify(store, PREFIX, { deep: true, identities: [operator.identity] });
    expect(report.ok, JSON.stringify(report.manifests.map((m) => m.problems))).toBe(true);
    const locked = await verify(store, PREFIX, { deep: true });
    const problems = locked.manifests.flatMap((m) => m.problems);
    expect(new Set(problems.map((problem) => problem.kind))).toEqual(new Set(['key-missing']));
    expect(problems.some((problem) => problem.key?.endsWith('.archive.bko'))).toBe(true);
    const points = await listRestorePoints(store, PREFIX, {
      deep: true,
      identities: [operator.identity],
    });
    expect(points.length).toBeGreaterThan(0);
  });

  it('refuses a restore without the identity before anything is written, naming the sealed archive and side files', async () => {
    const { store } = await backedUp();
    const target = await tempDirectory('target');
    let refused: unknown;
    try {
      await restoreFramedStore(store, PREFIX, target, {});
    } catch (error) {
      refused = error;
    }
    expect(ObjectKeyError.isInstance(refused)).toBe(true);
    expect((refused as ObjectKeyError).code).toBe('RESTORE_KEY_MISSING');
    const locked = (refused as ObjectKeyError).objects.map((object) => object.key);
    expect(locked.some((key) => key.endsWith('.archive.bko'))).toBe(true);
    expect(locked.some((key) => parseSideKey(PREFIX, key)?.layout === 'object')).toBe(true);
    expect(await readdir(target)).toEqual([]);
  });

  it('refuses a sealed archive replaced by a raw one in clear, before anything is written', async () => {
    const { engine, store } = await backedUp();
    const plain = await readFile(join(engine.directory, 'wal.1.archive'));
    await rewriteLatest(store, (files) => {
      const archive = files.find((file) => file.name === 'wal.1.archive')!;
      const { generation, n } = parseArchiveKey(PREFIX, archive.key)!;
      archive.key = archiveKey(PREFIX, generation, n);
      archive.size = plain.byteLength;
      archive.crc32 = crc32Hex(plain);
    });
    const { manifest } = await latestManifest(store);
    const raw = manifest.files.find((file) => file.name === 'wal.1.archive')!;
    await store.put(raw.key, new Uint8Array(plain));
    const target = await tempDirectory('target');
    const refusal = restoreFramedStore(store, PREFIX, target, { identities: [operator.identity] });
    await expect(refusal).rejects.toSatisfy(
      (error) => ObjectEncodingError.isInstance(error) && error.field === 'encryption',
    );
    expect(await readdir(target)).toEqual([]);
    const report = await verify(store, PREFIX, { deep: true, identities: [operator.identity] });
    const latest = report.manifests.find((m) => m.key === report.latest.manifestKey)!;
    expect(latest.problems).toContainEqual(
      expect.objectContaining({ kind: 'object-encoding', key: raw.key }),
    );
  });

  it('refuses a sealed side file replaced by an envelope in clear', async () => {
    const { engine, store } = await backedUp();
    const roles = await readFile(join(engine.directory, 'roles.json'));
    const { manifest } = await latestManifest(store);
    const sealed = manifest.files.find((file) => file.name === 'roles.json')!;
    const clear = encodeSegmentObject(new Uint8Array(roles), {
      codec: 'zstd',
      kind: 'file',
      generation: 0,
      start: 0,
      end: roles.byteLength,
      commits: 0,
      previousCrc32: 0,
      lineage: sealed.lineage,
    });
    const key = sideObjectKey(PREFIX, 'roles.json', crc32Hex(clear), clear.byteLength);
    await store.put(key, clear);
    await rewriteLatest(store, (files) => {
      const entry = files.find((file) => file.name === 'roles.json')!;
      Object.assign(entry, { key, size: clear.byteLength, crc32: crc32Hex(clear) });
    });
    const target = await tempDirectory('target');
    await expect(
      restoreFramedStore(store, PREFIX, target, { identities: [operator.identity] }),
    ).rejects.toSatisfy(
      (error) =>
        ObjectEncodingError.isInstance(error) && error.field === 'encryption' && error.key === key,
    );
    expect(await readdir(target)).toEqual([]);
  });
});

describe('a restart of an encrypting worker', () => {
  /** The sealed archive's and side files' keys the latest restore point names. */
  async function reusedKeys(store: MemoryStore): Promise<string[]> {
    const { manifest } = await latestManifest(store);
    return manifest.files
      .filter((file) => file.name !== 'snapshot.bin')
      .map((file) => file.key)
      .sort();
  }

  it('reuses the archive and side files sealed to exactly its recipients, and seals them again for others', async () => {
    const { engine, store } = await backedUp();
    const before = await reusedKeys(store);
    expect(before.length).toBeGreaterThanOrEqual(4);

    // Same recipients, with the identity: a new generation on the same objects.
    await engine.commit(1);
    await worker(store, engine, sealedTo(operator)).runOnce();
    const { manifest: same } = await latestManifest(store);
    expect(await reusedKeys(store)).toEqual(before);

    // Other recipients: every archive and side file sealed again, to them.
    await engine.commit(1);
    await worker(store, engine, sealedTo(other)).runOnce();
    const { key, manifest: resealed } = await latestManifest(store);
    expect(resealed.walGeneration).toBeGreaterThan(same.walGeneration);
    const after = await reusedKeys(store);
    for (const sealedKey of after) {
      expect(before).not.toContain(sealedKey);
      const header = readSegmentObjectHeader((await store.get(sealedKey))!.body);
      expect(header.recipients.map((recipient) => recipient.text)).toEqual([other.recipient.text]);
    }
    await expectRestoreEqualsSource(store, PREFIX, engine, key, { identities: [other.identity] });
  });

  it('without an identity (a tenure key), uploads its archive and side files again', async () => {
    const onlyRecipient = { recipients: [operator.recipient] };
    const { engine, store } = await backedUp(onlyRecipient);
    const before = await reusedKeys(store);
    await engine.commit(1);
    await worker(store, engine, onlyRecipient).runOnce();
    for (const key of await reusedKeys(store)) expect(before).not.toContain(key);
  });

  it('a worker in clear after an encrypting one stores its archive and side files in clear', async () => {
    const { engine, store } = await backedUp();
    await engine.commit(1);
    await worker(store, engine).runOnce();
    const { key, manifest } = await latestManifest(store);
    for (const file of manifest.files.filter((f) => f.name !== 'snapshot.bin'))
      expect(
        (parseArchiveKey(PREFIX, file.key) ?? parseSideKey(PREFIX, file.key))?.layout,
        file.key,
      ).toBe('raw');
    await expectRestoreEqualsSource(store, PREFIX, engine, key);
  });
});

describe('side objects an earlier writer left unnamed', () => {
  /** What a writer killed between a side upload and its manifest leaves behind. */
  async function leaveOrphans(store: MemoryStore) {
    const sealed = encodeSegmentObject(
      new TextEncoder().encode('{"roles":["crashed"]}'),
      {
        codec: 'zstd',
        kind: 'file',
        generation: 0,
        start: 0,
        end: 21,
        commits: 0,
        previousCrc32: 0,
        lineage: 'x',
      },
      { recipients: [operator.recipient] },
    );
    const orphans = {
      sealed: sideObjectKey(PREFIX, 'roles.json', crc32Hex(sealed), sealed.byteLength),
      raw: sideKey(PREFIX, 'roles.json', '0badc0de', 7),
      notOurs: sideObjectKey(PREFIX, 'notes.txt', '0badc0de', 7),
    };
    await store.put(orphans.sealed, sealed);
    await store.put(orphans.raw, new TextEncoder().encode('crashed'));
    await store.put(orphans.notOurs, new TextEncoder().encode('crashed'));
    return orphans;
  }

  it('are deleted by the next writer’s first retention pass; named ones and other names stay', async () => {
    const { engine, store } = await backedUp();
    const orphans = await leaveOrphans(store);
    await engine.commit(1);
    await worker(store, engine, sealedTo(operator)).runOnce();
    expect(await store.get(orphans.sealed)).toBeNull();
    expect(await store.get(orphans.raw)).toBeNull();
    expect(await store.get(orphans.notOurs)).not.toBeNull();
    const named = new Set<string>();
    for (const { key } of (await store.list(`${PREFIX}/manifest/`)).objects)
      for (const file of parseManifest((await store.get(key))!.body, { prefix: PREFIX }).files)
        named.add(file.key);
    for (const key of named) expect(await store.get(key), key).not.toBeNull();
    const { key } = await latestManifest(store);
    await expectRestoreEqualsSource(store, PREFIX, engine, key, {
      identities: [operator.identity],
    });
  });

  it('stay while a manifest under the prefix cannot be read', async () => {
    const { engine, store } = await backedUp();
    const orphans = await leaveOrphans(store);
    await store.put(`${PREFIX}/manifest/00000000000000000001.json`, new TextEncoder().encode('{'));
    await engine.commit(1);
    await worker(store, engine, sealedTo(operator)).runOnce();
    expect(await store.get(orphans.sealed)).not.toBeNull();
    expect(await store.get(orphans.raw)).not.toBeNull();
  });
});
