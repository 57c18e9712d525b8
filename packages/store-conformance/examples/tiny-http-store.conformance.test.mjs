import { probeConditionalWrites } from '@x/store-conformance';
import { describeStoreConformance } from '@x/store-conformance/vitest';
import { expect, it } from 'vitest';
import { startTinyServer, TinyHttpStore } from './tiny-http-store.mjs';

// Bring your own server: start it in createStore, stop it in disposeStore.
let server;
describeStoreConformance('TinyHttpStore', {
  createStore: async () => {
    server = await startTinyServer();
    return new TinyHttpStore(server.url);
  },
  disposeStore: () => server.close(),
});

it('honours every conditional write, by behaviour', async () => {
  const probed = await startTinyServer();
  try {
    const report = await probeConditionalWrites(new TinyHttpStore(probed.url), 'probe');
    expect(report.create.outcome).toBe('honoured');
    expect(report.replace.outcome).toBe('honoured');
    expect(report.delete.outcome).toBe('honoured');
  } finally {
    await probed.close();
  }
});
