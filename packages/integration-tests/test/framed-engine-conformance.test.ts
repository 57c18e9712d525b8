/**
 * The framed store engine runs the engine conformance suite, in clear and
 * encrypted (its archives, chain and side files sealed too); a meta-test
 * shows the suite fails an engine whose restore drops a commit.
 */

import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateIdentity, parseIdentity, parseRecipient } from '@x/age-envelope';
import type { EncryptionOptions } from '@x/backup-worker';
import type { RestoreMaterializer } from '@x/engine';
import { type EngineUnderTest, runEngineConformance } from '@x/engine-conformance';
import { describeEngineConformance } from '@x/engine-conformance/vitest';
import { FramedDirSource, framedStoreMaterializer } from '@x/source-framed';
import { completeFrames, FRAME_HEADER_BYTES } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import { FramedTestEngine } from './helpers/framed-engine.ts';

/** The payloads of a framed log's whole frames, in order. */
function payloads(bytes: Uint8Array): string[] {
  const texts: string[] = [];
  const whole = bytes.subarray(0, completeFrames(bytes).length);
  const view = new DataView(whole.buffer, whole.byteOffset, whole.byteLength);
  for (let offset = 0; offset < whole.byteLength; ) {
    const length = view.getUint32(offset, true);
    const start = offset + FRAME_HEADER_BYTES;
    texts.push(new TextDecoder().decode(whole.subarray(start, start + length)));
    offset = start + length;
  }
  return texts;
}

/** A framed store's state: its snapshot, archived and live commits, and side files. */
async function framedState(directory: string): Promise<string> {
  const names = (await readdir(directory)).sort();
  const text = async (name: string) =>
    names.includes(name) ? await readFile(join(directory, name), 'utf8') : null;
  const archives = names.filter((name) => name.endsWith('.archive'));
  return JSON.stringify({
    snapshot: await text('snapshot.bin'),
    archives: await Promise.all(
      archives.map(async (name) => payloads(await readFile(join(directory, name)))),
    ),
    wal: payloads(await readFile(join(directory, 'wal.bin'))),
    roles: await text('roles.json'),
    keys: await text('keys.json'),
  });
}

function framedEngine(
  materializer: RestoreMaterializer,
  encryption?: EncryptionOptions,
): EngineUnderTest {
  return {
    materializer,
    ...(encryption === undefined ? {} : { encryption }),
    restoredState: framedState,
    async createFixture() {
      const directory = await mkdtemp(join(tmpdir(), 'framed-conformance-'));
      const engine = await FramedTestEngine.create(directory);
      await engine.commit(2);
      await engine.snapshot();
      return {
        openSource: () => new FramedDirSource({ directory, engine }),
        commit: (count) => engine.commit(count),
        state: () => framedState(directory),
        kill: () => {},
        close: async (source) => {
          await source.close?.();
        },
        dispose: () => rm(directory, { recursive: true, force: true }),
      };
    },
  };
}

describeEngineConformance('framed store', framedEngine(framedStoreMaterializer));

const operator = generateIdentity();
describeEngineConformance(
  'framed store, encrypted',
  framedEngine(framedStoreMaterializer, {
    recipients: [parseRecipient(operator.recipient)],
    identities: [parseIdentity(operator.identity, 'operator key')],
  }),
);

describe('engine conformance meta', () => {
  it('fails an engine whose restore cuts one commit short', async () => {
    const honest = framedStoreMaterializer;
    const shortByOne: RestoreMaterializer = {
      ...honest,
      createWalCutter: (commits) => honest.createWalCutter(Math.max(0, commits - 1)),
    };
    const failures = await runEngineConformance(framedEngine(shortByOne));
    expect(failures.map((failure) => failure.name)).toContain('capture and exact restore');
  });
});
