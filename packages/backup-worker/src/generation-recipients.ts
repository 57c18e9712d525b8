/**
 * Whether a restart may continue the newest restore point's generation as
 * far as encryption goes: its objects must be sealed to exactly the
 * recipients this worker writes to (none: in clear), which also means this
 * worker can open them. The snapshot's header says it for the whole
 * generation (a worker never mixes two sets in one), at the cost of its
 * first bytes: one partial GET, the body not read.
 */
import { type Manifest, parseSnapshotKey } from '@x/manifest';
import type { WorkerContext } from './context.ts';
import { RestorePointReadError } from './errors.ts';
import { readStoredHeader } from './stored-header-read.ts';

/**
 * Why the generation of `latest` (one snapshot, checked by the caller) must
 * not be continued by this worker, or `null`.
 * @throws RestorePointReadError when the snapshot is missing or its header does not read.
 */
export async function generationRecipientsProblem(
  ctx: WorkerContext,
  latest: Manifest,
): Promise<string | null> {
  const entry = latest.files[0]!;
  const what = `generation ${latest.walGeneration}`;
  // A snapshot of an earlier release, the raw image: in clear.
  if (parseSnapshotKey(ctx.prefix, entry.key)?.layout !== 'object')
    return ctx.keys.disagreement([], what);
  const header = await readStoredHeader(
    ctx.requests,
    entry.key,
    (problem) => new RestorePointReadError(entry.key, problem),
  );
  return ctx.keys.disagreement(header.recipients, what);
}
