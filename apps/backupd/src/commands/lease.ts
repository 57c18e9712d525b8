/** `backupd lease <url>`: who holds the lease, since when, and how long until it may be taken over. */
import { LeaseRecordError, MAX_SANE_TTL_S, readLease } from '@x/lease';
import { EXIT_FAILED, EXIT_OK } from '../exit-codes.ts';
import type { CommandContext } from '../main.ts';
import { expectPositionals, openUrlArgument, print, printJson } from './shared.ts';

/** An instant for people; a value beyond what a Date can hold (a hostile record) is shown as the number. */
function instant(milliseconds: number): string {
  const date = new Date(milliseconds);
  return Number.isNaN(date.getTime())
    ? `${milliseconds} ms since the epoch (out of range)`
    : date.toISOString();
}

function seconds(milliseconds: number): string {
  const value = Math.round(milliseconds / 1000);
  return value < 120 ? `${value}s` : `${Math.round(value / 60)}m`;
}

export async function leaseCommand(context: CommandContext): Promise<number> {
  expectPositionals(context, 1);
  const { store, prefix } = await openUrlArgument(context, 0);
  const now = Date.now();
  let found: Awaited<ReturnType<typeof readLease>>;
  try {
    found = await readLease(store, prefix, { signal: AbortSignal.timeout(30_000) });
  } catch (error) {
    if (error instanceof LeaseRecordError) {
      // A record that does not parse is suspect, never absent: say so and fail.
      print(
        context,
        `the lease record is not valid: ${error.message}\nNo instance will treat the prefix as free until it has seen this record unchanged for one TTL.`,
      );
      return EXIT_FAILED;
    }
    throw error;
  }
  const exclusion = store.capabilities.conditionalPut
    ? 'conditional (the store declares conditional writes; `backupd check` measures whether the service honours them)'
    : 'best-effort (the store cannot write conditionally)';
  if (!found) {
    if (context.values.json) printJson(context, { held: false, exclusion });
    else
      print(
        context,
        `no lease: nobody has backed up to this prefix yet, or the record was removed\nexclusion: ${exclusion}`,
      );
    return EXIT_OK;
  }
  const { record } = found;
  const expiresAt = record.renewedAt + record.ttlSeconds * 1000;
  const suspect =
    record.ttlSeconds > MAX_SANE_TTL_S || record.renewedAt - now > record.ttlSeconds * 1000;
  const state = record.released
    ? 'released'
    : suspect
      ? 'suspect'
      : expiresAt > now
        ? 'held'
        : 'expired';
  if (context.values.json) {
    printJson(context, { state, record, expiresAt: instant(expiresAt), exclusion });
    return EXIT_OK;
  }
  const lines = [
    `state: ${state}`,
    `holder: ${record.host} (pid ${record.pid}, instance ${record.instanceId})`,
    `acquired: ${instant(record.acquiredAt)}`,
    `renewed: ${instant(record.renewedAt)} (${record.renewedAt > now ? `${seconds(record.renewedAt - now)} in the future` : `${seconds(now - record.renewedAt)} ago`} by this machine's clock)`,
    `ttl: ${record.ttlSeconds}s, generation ${record.generation}${record.term !== undefined ? `, term ${record.term}` : ''}`,
  ];
  if (state === 'held')
    lines.push(
      `may be taken over in: ${seconds(expiresAt - now)} (at ${instant(expiresAt)}) unless renewed`,
    );
  if (state === 'expired') lines.push('may be taken over now: it was not renewed within its TTL');
  if (state === 'suspect') {
    lines.push(
      'suspect: renewed in the future beyond its TTL, or a TTL over the sane maximum; another instance takes it over after seeing it unchanged for one of its own TTLs',
    );
  }
  if (state === 'released')
    lines.push(
      'released by its holder: the prefix is free (the generation is kept so the next holder gets a higher one)',
    );
  lines.push(`exclusion: ${exclusion}`);
  print(context, lines.join('\n'));
  return EXIT_OK;
}
