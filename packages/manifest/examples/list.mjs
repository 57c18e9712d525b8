import {
  manifestKey,
  objectKey,
  parseManifestKey,
  parseSegmentKey,
  segmentGenerationPrefix,
  segmentKey,
} from '@x/manifest';
import { MemoryStore } from '@x/store';

const store = new MemoryStore();
const prefix = 'backups/db1';
const generation = 4;
const empty = new Uint8Array();
for (const commitSeq of [144, 9, 12]) {
  await store.put(manifestKey(prefix, commitSeq), empty, { mode: 'create' });
}
await store.put(segmentKey(prefix, generation, 8192, 9000), empty, { mode: 'create' });
await store.put(segmentKey(prefix, generation, 0, 8192), empty, { mode: 'create' });

// Newest restore points with one LIST:
const manifests = await store.list(objectKey(prefix, 'manifest/'));
const commitSeqs = manifests.objects
  .map((o) => parseManifestKey(prefix, o.key))
  .filter((n) => n !== undefined); // sorted: padding makes key order numeric order
console.log(commitSeqs);

// Segments of one generation, in byte order:
const listed = await store.list(segmentGenerationPrefix(prefix, generation));
const ranges = listed.objects.map((o) => parseSegmentKey(prefix, o.key)).filter(Boolean);
console.log(ranges.map(({ start, end }) => `${start}-${end}`));
