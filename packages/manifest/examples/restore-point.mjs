import {
  computeCommitSeq,
  crc32Hex,
  latestKey,
  manifestKey,
  parseLatest,
  parseManifest,
  segmentKey,
  serializeLatest,
  serializeManifest,
  verifyLineage,
} from '@x/manifest';
import { MemoryStore } from '@x/store';

const store = new MemoryStore();
const prefix = 'backups/db1';
const lineage = '5f0c2a9e8b7d4c1fa3e6b2d9c8f1e0a7';
const bytes = new TextEncoder().encode('twelve commits of WAL');
const files = [];

// Writing a restore point (the worker):
const segments = [
  {
    key: segmentKey(prefix, 4, 0, bytes.length),
    size: bytes.length,
    crc32: crc32Hex(bytes),
    frames: 12,
    lineage,
  },
];
await store.put(segments[0].key, bytes, { mode: 'create' });
const manifest = {
  formatVersion: 1,
  lineage,
  createdAt: new Date().toISOString(),
  commitSeq: computeCommitSeq({ oldestCommitSeq: 0, files, segments }),
  oldestCommitSeq: 0,
  walGeneration: 4,
  files,
  segments,
};
verifyLineage(manifest);
const key = manifestKey(prefix, manifest.commitSeq);
await store.put(key, new TextEncoder().encode(serializeManifest(manifest, { prefix })), {
  mode: 'create',
});
await store.put(latestKey(prefix), new TextEncoder().encode(serializeLatest(key)), {
  mode: 'create',
});

// Reading one (restore):
const latestObject = await store.get(latestKey(prefix));
const newest = parseLatest(latestObject.body, { prefix }); // ManifestError if not a manifest key of prefix
const manifestObject = await store.get(newest);
const restorePoint = parseManifest(manifestObject.body, { prefix }); // ManifestError naming the field
verifyLineage(restorePoint);
console.log(newest);
console.log(restorePoint.commitSeq, restorePoint.segments[0].key);
