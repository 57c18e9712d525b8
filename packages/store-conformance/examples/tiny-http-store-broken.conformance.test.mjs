// The same backend on a server that ignores If-Match on DELETE (as MinIO
// does): this suite must FAIL, naming the conditional-delete cases.
import { probeConditionalWrites } from '@x/store-conformance';
import { describeStoreConformance } from '@x/store-conformance/vitest';
import { expect, it } from 'vitest';
import { startTinyServer, TinyHttpStore } from './tiny-http-store.mjs';

let server;
describeStoreConformance('TinyHttpStore ignoring If-Match on DELETE', {
  createStore: async () => {
    server = await startTinyServer({ ignoreIfMatchOnDelete: true });
    return new TinyHttpStore(server.url);
  },
  disposeStore: () => server.close(),
});

it('honours every conditional write, by behaviour', async () => {
  const probed = await startTinyServer({ ignoreIfMatchOnDelete: true });
  try {
    const report = await probeConditionalWrites(new TinyHttpStore(probed.url), 'probe');
    expect(report.delete.outcome).toBe('honoured');
  } finally {
    await probed.close();
  }
});
