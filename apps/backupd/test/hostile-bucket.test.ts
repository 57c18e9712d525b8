/**
 * Hostile bucket contents: whatever the bucket holds, resume, retention,
 * restore, `backupd ls`, `backupd verify`, `backupd lease` and the lease
 * acquire each refuse or report with a clear message, never crash (no
 * unhandled rejection, no stack trace, no generic runtime error), never write
 * outside the target directory or the prefix, never delete an object they
 * did not write, and read a hostile object no further than its cap.
 *
 * One row per hostile case: what is planted, then what each operation must
 * do and the words it must say. Every row runs on a fresh copy of a baseline
 * bucket with three restore points (commits 2, 3, 4; LATEST names commit 4)
 * and one object outside the prefix (`other/secret`). Rows that plant a
 * manifest put it at commit 5's key (or the commit its `at` says) and point
 * LATEST at it, unless the row says `latest: false`. The helpers above the
 * table (`badLatest`, `badManifest`, `badObject`, `badLease`) spell out what
 * each operation says about one kind of damage; the row gives the words.
 *
 * A failing row is a place where the product does less than this promise;
 * SECURITY.md lists them under "Known gaps".
 */
import {
  MAX_LATEST_BYTES,
  MAX_MANIFEST_BYTES,
  segmentObjectKey,
  sideKey,
  snapshotKey,
  snapshotObjectKey,
} from '@x/manifest';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { OUTSIDE_KEY, PREFIX } from './hostile/bucket.ts';
import { OPERATIONS } from './hostile/operations.ts';
import {
  all,
  deleteNamed,
  editedManifest,
  entry,
  fileNamed,
  hugeLatest,
  lastSegment,
  latestText,
  leaseRecord,
  leaseText,
  manifestBytes,
  manifestCopyAt,
  object,
  rewriteNamed,
  symlinkedSideDirectory,
} from './hostile/plant.ts';
import { HostileTable, passes, type Row, refuses } from './hostile/table.ts';

const YEAR_S = 365 * 24 * 3600;
const TEN_YEARS_MS = 10 * YEAR_S * 1000;
const M5 = `${PREFIX}/manifest/00000000000000000005.json`;
const M7 = `${PREFIX}/manifest/00000000000000000007.json`;
const SNAPSHOT = snapshotObjectKey(PREFIX, 0, 0);
const SEG = `${PREFIX}/wal/00000000000000000000/00000000000000000048-00000000000000000064.seg`;
/** The baseline's generation-0 objects, which only manifests 2–4 name. */
const GENERATION_0 = [
  snapshotObjectKey(PREFIX, 0, 0),
  segmentObjectKey(PREFIX, 0, 0, 32),
  segmentObjectKey(PREFIX, 0, 32, 48),
  segmentObjectKey(PREFIX, 0, 48, 64),
];
const flipLastByte = (bytes: Uint8Array): Uint8Array => {
  const copy = Uint8Array.from(bytes);
  copy[copy.length - 1] = copy[copy.length - 1]! ^ 0xff;
  return copy;
};
const withTail = (bytes: Uint8Array): Uint8Array => Buffer.concat([bytes, Buffer.from('tail')]);

// What an operation says when the row does not concern it.
const BUCKET_FINE = {
  resume: passes('backed up commit 5'),
  restore: passes('restored commit 4'),
  ls: passes('*       0..4'),
  verify: passes('verified 3 restore point(s)'),
};
const NO_LEASE = { lease: passes('no lease'), acquire: passes('acquired generation 1') };

/**
 * LATEST is unusable, with `problem`: the worker heals it (LATEST rewritten
 * to the newest manifest that passes the checks) and backs up; a restore of
 * the latest state falls back to that manifest and says so; ls and verify
 * report it.
 */
const badLatest = (problem: string) => ({
  resume: passes('backed up commit 5'),
  restore: passes('restored commit 4'),
  ls: passes(problem),
  verify: refuses('LATEST: (none) PROBLEM', problem),
  ...NO_LEASE,
});
/**
 * The manifest at `key`, which LATEST names, fails its checks with `problem`:
 * the worker heals LATEST to the newest manifest that passes and backs up; a
 * restore of the latest state falls back to it; ls and verify report it.
 */
const badManifest = (key: string, problem: string) => ({
  resume: passes('backed up commit 5'),
  restore: passes('restored commit 4'),
  ls: passes(`PROBLEM: LATEST names ${key}, which is corrupt`, problem),
  verify: refuses(`LATEST names ${key}, which does not verify`, problem),
  ...NO_LEASE,
});
/** An object LATEST's manifest names is damaged: restore and verify refuse; nothing else reads it. */
const badObject = (restoreSays: string, verifySays: string, deepSays = verifySays) => ({
  resume: passes('backed up commit 5'),
  restore: refuses(restoreSays),
  ls: passes('*       0..4'),
  verify:
    verifySays === ''
      ? passes('verified 3 restore point(s) (sizes; add --deep for CRC-32)')
      : refuses(verifySays),
  deep: refuses(deepSays),
  ...NO_LEASE,
});
/** The lease record is refused by whatever reads it, with `problem`; the backups are untouched. */
const badLease = (problem: string) => ({
  ...BUCKET_FINE,
  lease: refuses('the lease record is not valid: invalid lease record at backup/LEASE', problem),
  acquire: refuses('invalid lease record at backup/LEASE', problem),
});

// biome-ignore format: one hostile case per line, its expectations beside it
const ROWS: Row[] = [
  // ── LATEST ──
  { name: 'LATEST is garbage', plant: latestText('garbage \u0001\u00ff not a key'), expect: badLatest('does not hold one manifest key of prefix "backup"') },
  { name: 'LATEST names a key outside the prefix', plant: all(manifestCopyAt('other/manifest/00000000000000000004.json'), latestText('other/manifest/00000000000000000004.json')), expect: badLatest('does not hold one manifest key of prefix "backup"') },
  { name: 'LATEST names a path with ..', plant: all(manifestCopyAt('other/manifest/00000000000000000004.json'), latestText(`${PREFIX}/manifest/../../other/manifest/00000000000000000004.json`)), expect: badLatest('does not hold one manifest key of prefix "backup"') },
  { name: 'LATEST is huge (1 MiB, over its 4 KiB cap)', plant: hugeLatest(1024 * 1024), readCap: { key: `${PREFIX}/LATEST`, bytes: MAX_LATEST_BYTES }, expect: badLatest('larger than') },
  { name: 'LATEST names a manifest that does not exist', plant: latestText(`${PREFIX}/manifest/00000000000000000099.json`), expect: { ...badLatest(`LATEST names ${PREFIX}/manifest/00000000000000000099.json, which does not exist`), verify: refuses(`LATEST names ${PREFIX}/manifest/00000000000000000099.json, which does not exist`) } },
  // ── manifests that LATEST names (at commit 5's key unless said) ──
  { name: 'manifest with wrong types (commitSeq is a string)', plant: editedManifest({ edit: (m) => { m.commitSeq = '5'; } }), expect: badManifest(M5, 'invalid manifest field commitSeq: expected a number, found a string') },
  { name: 'manifest with wrong types (files is an object)', plant: editedManifest({ edit: (m) => { (m as Record<string, unknown>).files = { 0: m.files[0] }; } }), expect: badManifest(M5, 'invalid manifest field files: expected an array') },
  { name: 'manifest number beyond 2^53 (commitSeq 9007199254740993)', plant: editedManifest({ text: (t) => t.replace('"commitSeq": 4', '"commitSeq": 9007199254740993') }), expect: badManifest(M5, 'invalid manifest field commitSeq: beyond 2^53 - 1') },
  { name: 'manifest number beyond 2^53 (segment size 1e400)', plant: editedManifest({ text: (t) => t.replace(/(00000000000000000032-00000000000000000048\.seg",\s*"size": )\d+/, '$11e400') }), expect: badManifest(M5, 'invalid manifest field segments[1].size: expected a non-negative integer in plain decimal, found 1e400') },
  { name: 'manifest file key outside the prefix', plant: editedManifest({ edit: (m) => { entry(m, 'roles.json').key = OUTSIDE_KEY; } }), expect: badManifest(M5, 'invalid manifest field files[3].key: outside the manifest\'s prefix "backup"') },
  { name: 'manifest segment key outside the prefix', plant: editedManifest({ edit: (m) => { m.segments[0]!.key = OUTSIDE_KEY; } }), expect: badManifest(M5, 'invalid manifest field segments[0].key: outside the manifest\'s prefix "backup"') },
  { name: 'manifest file key with .. back out of the prefix', plant: editedManifest({ edit: (m) => { entry(m, 'roles.json').key = `${PREFIX}/side/../../${OUTSIDE_KEY}`; } }), expect: badManifest(M5, 'invalid manifest field files[3].key: not a snapshot, archive or side-file key of this layout') },
  { name: 'side-file name ../../etc/passwd', plant: editedManifest({ edit: (m) => { entry(m, 'roles.json').name = '../../etc/passwd'; } }), expect: badManifest(M5, 'invalid manifest field files[3].name: not a plain file name: contains a path separator') },
  { name: 'side-file name is an absolute path', plant: editedManifest({ edit: (m, paths) => { entry(m, 'roles.json').name = `${paths.root}/victim`; } }), expect: badManifest(M5, 'invalid manifest field files[3].name: not a plain file name: contains a path separator') },
  { name: 'NUL in a file name', plant: editedManifest({ edit: (m) => { entry(m, 'roles.json').name = 'roles\u0000.json'; } }), expect: badManifest(M5, 'invalid manifest field files[3].name: not a plain file name: contains NUL or a control character') },
  { name: 'NUL in a key', plant: editedManifest({ edit: (m) => { entry(m, 'roles.json').key = `${PREFIX}/side/roles.json/3738ece2\u0000-00000000000000000012`; } }), expect: badManifest(M5, 'invalid manifest field files[3].key: not a snapshot, archive or side-file key of this layout') },
  { name: 'manifest over the 16 MiB cap', plant: editedManifest({ text: (t) => t + ' '.repeat(MAX_MANIFEST_BYTES) }), readCap: { key: M5, bytes: MAX_MANIFEST_BYTES }, expect: { ...badManifest(M5, 'larger than'), ls: passes('corrupt: larger than 16777216 bytes'), verify: refuses(`LATEST names ${M5}, which does not verify`, 'larger than 16777216 bytes') } },
  { name: 'manifest whose commitSeq does not add up (7 for 4 frames)', plant: editedManifest({ at: 7, edit: (m) => { m.commitSeq = 7; } }), expect: badManifest(M7, 'invalid manifest field commitSeq: 7 does not equal oldestCommitSeq + the frames listed (4)') },
  { name: 'manifest that is not JSON', plant: manifestBytes(5, new TextEncoder().encode('{"formatVersion": 1, "lineage": ')), expect: badManifest(M5, 'invalid manifest: not valid JSON') },
  { name: 'manifest that is not UTF-8', plant: manifestBytes(5, Uint8Array.from([0x7b, 0xff, 0xfe, 0x7d])), expect: badManifest(M5, 'invalid manifest: not valid UTF-8') },
  // These parse: the worker, which restores nothing, resumes; restore and verify refuse them.
  { name: 'side file named wal.bin (a file restore rebuilds)', plant: all(object(sideKey(PREFIX, 'wal.bin', '3738ece2', 12), '{"roles":[]}'), editedManifest({ at: 4, edit: (m) => { const e = entry(m, 'roles.json'); e.name = 'wal.bin'; e.key = sideKey(PREFIX, 'wal.bin', '3738ece2', 12); } })), expect: { ...BUCKET_FINE, restore: refuses('the manifest names a file "wal.bin", which a restore point never carries'), ...NO_LEASE } },
  { name: 'hidden file name .profile', plant: all(object(sideKey(PREFIX, '.profile', '3738ece2', 12), '{"roles":[]}'), editedManifest({ at: 4, edit: (m) => { const e = entry(m, 'roles.json'); e.name = '.profile'; e.key = sideKey(PREFIX, '.profile', '3738ece2', 12); } })), expect: { resume: passes('backed up commit 5'), restore: passes('restored commit 4'), ls: passes('corrupt: file name ".profile" starts with "."'), verify: refuses('file name ".profile" starts with "."'), ...NO_LEASE } },
  { name: 'manifest whose key says 6 and body says 4', plant: editedManifest({ at: 6 }), expect: { resume: passes('backed up commit 5'), restore: passes('restored commit 4'), ls: passes('corrupt: the key says commit 6, the manifest says commitSeq 4'), verify: refuses('the key says commit 6, the manifest says commitSeq 4'), ...NO_LEASE } },
  // ── manifests beside a good LATEST ──
  { name: 'unparseable manifest beside LATEST', plant: manifestBytes(100, new TextEncoder().encode('not a manifest'), false), expect: { ...BUCKET_FINE, ls: passes('corrupt: does not parse: invalid manifest: not valid JSON'), verify: refuses('does not parse: invalid manifest: not valid JSON'), ...NO_LEASE } },
  { name: "another lineage's manifest naming our objects", plant: editedManifest({ at: 100, latest: false, edit: (m) => { m.lineage = 'someone-else'; for (const e of [...m.files, ...m.segments]) e.lineage = 'someone-else'; m.oldestCommitSeq = 96; m.commitSeq = 100; } }), protect: () => GENERATION_0, expect: { ...BUCKET_FINE, ls: passes('someone-else'), verify: passes('verified 4 restore point(s)'), ...NO_LEASE } },
  { name: 'stray object under manifest/', plant: object(`${PREFIX}/manifest/notes.txt`, 'hello'), expect: { ...BUCKET_FINE, verify: refuses(`${PREFIX}/manifest/notes.txt is under manifest/ but is not a manifest key`), ...NO_LEASE } },
  { name: 'snapshot key claiming generation 2^53 - 1 (no next generation)', plant: object(snapshotKey(PREFIX, Number.MAX_SAFE_INTEGER, 0), 'x'), expect: { ...BUCKET_FINE, resume: refuses('invalid generation "9007199254740992"'), ...NO_LEASE } },
  // ── objects LATEST's manifest names ──
  { name: 'segment whose size does not match', plant: rewriteNamed(lastSegment, withTail), expect: badObject(`object ${SEG} is corrupt: size expected`, `${SEG} is`, `${SEG} is`) },
  { name: 'segment whose CRC does not match', plant: rewriteNamed(lastSegment, flipLastByte), expect: badObject(`object ${SEG} is corrupt: crc32 expected`, '', `object ${SEG} is corrupt: crc32 expected`) },
  { name: 'snapshot whose CRC does not match', plant: rewriteNamed(fileNamed('snapshot.bin'), flipLastByte), expect: badObject(`object ${SNAPSHOT} is corrupt: crc32 expected `, '', `object ${SNAPSHOT} is corrupt: crc32 expected `) },
  { name: 'object the manifest names is missing', plant: deleteNamed(lastSegment), expect: badObject(`object ${SEG} named by ${PREFIX}/manifest/00000000000000000004.json does not exist`, `${SEG} does not exist`) },
  { name: 'symbolic link inside the store directory', plant: symlinkedSideDirectory(), expect: { resume: refuses('refusing a symbolic link inside the store root: backup/side'), restore: refuses('refusing a symbolic link inside the store root: backup/side'), ls: BUCKET_FINE.ls, verify: refuses(`${PREFIX}/side/wal.genesis/6da86191-00000000000000000009 does not exist`), ...NO_LEASE } },
  // ── the lease ──
  { name: 'lease with a TTL of a year', plant: leaseRecord({ ttlSeconds: YEAR_S }), expect: { ...BUCKET_FINE, lease: passes('state: suspect', 'ttl: 31536000s'), acquire: refuses('suspect record: TTL of 31536000 s exceeds MAX_SANE_TTL_S (3600 s)') } },
  { name: 'lease renewed far in the future (10 years)', plant: leaseRecord(() => ({ renewedAt: Date.now() + TEN_YEARS_MS })), expect: { ...BUCKET_FINE, lease: passes('state: suspect', `renewed: ${new Date(Date.now() + TEN_YEARS_MS).getUTCFullYear()}-`), acquire: refuses('suspect record: renewed', 'in the future by our clock, more than its own TTL of 30 s') } },
  { name: 'lease renewed at 2^53 - 1 ms (beyond any date)', plant: leaseRecord({ renewedAt: Number.MAX_SAFE_INTEGER, acquiredAt: Number.MAX_SAFE_INTEGER }), expect: { ...BUCKET_FINE, lease: passes('state: suspect'), acquire: refuses('suspect record: renewed', 'in the future by our clock, more than its own TTL of 30 s') } },
  { name: 'lease that is not JSON', plant: leaseText('holder=me; ttl=forever'), expect: badLease('not JSON') },
  { name: 'lease that is huge (1 MiB)', plant: leaseRecord({ host: 'x'.repeat(1024 * 1024) }), readCap: { key: `${PREFIX}/LEASE`, bytes: 64 * 1024 }, expect: badLease('more than 65536') },
  { name: 'lease with a number beyond 2^53', plant: leaseRecord({ generation: 2 ** 60 }), expect: badLease('field "generation" must be an integer') },
  { name: 'lease with wrong types', plant: leaseRecord({ ttlSeconds: '30', released: 'no' }), expect: badLease('field "ttlSeconds" must be an integer, got "30"') },
];

const table = new HostileTable();
beforeAll(() => table.setUp());
afterAll(() => table.tearDown());

describe.concurrent.each(ROWS)('hostile bucket: $name', (row) => {
  it.each(OPERATIONS)('%s', async (operation) => {
    await table.run(row, operation);
  });
});
