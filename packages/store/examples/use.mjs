import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AlreadyExistsError, FsStore, PreconditionFailedError } from '@x/store';

const root = await mkdtemp(join(tmpdir(), 'store-example-'));
const store = new FsStore({ root });
try {
  // Create-if-absent: exactly one of any number of concurrent writers wins.
  try {
    await store.put('LATEST', new TextEncoder().encode('manifest/0001.json'), { mode: 'create' });
  } catch (error) {
    if (!AlreadyExistsError.isInstance(error)) throw error;
  }

  // Replace-if-version (read-modify-write).
  const current = await store.get('LATEST');
  try {
    await store.put('LATEST', new TextEncoder().encode('manifest/0002.json'), {
      mode: { ifMatch: current.version },
      signal: AbortSignal.timeout(10_000),
    });
  } catch (error) {
    if (PreconditionFailedError.isInstance(error)) {
      // Someone else wrote it since we read it: read again and decide.
    } else throw error;
  }
  console.log(new TextDecoder().decode((await store.get('LATEST')).body));
} finally {
  await rm(root, { recursive: true, force: true });
}
