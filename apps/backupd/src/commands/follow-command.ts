/**
 * `backupd follow <url> <target.db>`: a read replica. Restores the latest
 * state into <target.db>, then applies every newer state as it lands,
 * until SIGINT or SIGTERM; then leaves the file exactly as restored so
 * `backupd replicate` can take over (the runbook: README, _Read replicas
 * and failover_). Readers open the target read-only while it runs.
 */
import { resolve } from 'node:path';
import { FollowError, type FollowedState, followSqlite } from '@x/follow';
import { AGE_IDENTITY_FILE_OPTIONS } from '../cli/age-identity-option.ts';
import {
  booleanOption,
  type CommandContextFor,
  defineCommand,
  stringOption,
  UsageError,
} from '../cli/command.ts';
import { DAEMON_OPTIONS } from '../cli/daemon-options.ts';
import { parseDuration } from '../duration.ts';
import { commandLineIdentities } from '../encryption-settings.ts';
import {
  EXIT_DATABASE_IN_USE,
  EXIT_FAILED,
  EXIT_INTERRUPTED,
  EXIT_OK,
  EXIT_REFUSED,
} from '../exit-codes.ts';
import { startStatusServer } from '../http-server.ts';
import { InstrumentedStore } from '../instrumented-store.ts';
import { createLogger, errorFields } from '../logger.ts';
import { DatabaseInUseError, lockDatabase } from '../replicate/database-lock.ts';
import type { ReplicaStatus } from '../status.ts';
import { describeLocation, parseStoreUrl } from '../store-url.ts';
import { VERSION } from '../version.ts';
import { expectPositionals, openUrlArgument } from './command-store.ts';
import { parseRestoreTime } from './restore-command.ts';

const options = {
  poll: stringOption({
    argument: '<duration>',
    description: 'time between two looks at the bucket (default 1s)',
    parse: parsePoll,
  }),
  'latest-only': booleanOption({
    description:
      "look only at LATEST (one HEAD per poll, no listing): cheaper on S3, where a LIST is billed as a PUT, but up to the writer's restore-point interval (15s) behind",
  }),
  until: stringOption({
    argument: '<T>',
    description:
      'stop at the newest state at or before T (RFC 3339 with Z or an offset): exit 0 once the bucket holds a commit after T',
    parse: parseRestoreTime,
  }),
  force: booleanOption({
    description: 'replace a <target.db> that follow did not create with the bucket state',
  }),
  ...DAEMON_OPTIONS,
  ...AGE_IDENTITY_FILE_OPTIONS,
} as const;

export const followCommand = defineCommand({
  name: 'follow',
  synopsis: 'follow <url> <target.db>',
  summary: 'keep a read-only copy of a backup up to date (a read replica)',
  usage:
    'Usage: backupd follow <url> <target.db> [--poll <duration>] [--latest-only] [--until <T>] [--force] [--listen <host:port>] [--age-identity-file <file>]... [--json]',
  description: `Restores the latest state of the backup at <url> to <target.db>, then applies
every newer state as it lands, until stopped (SIGINT or SIGTERM). Other
processes may read <target.db> at any time, opened read-only; each read
transaction sees one whole committed state, in commit order. Every object is
verified as restore verifies it. follow never writes to the bucket: read-only
credentials are enough. While nothing changes it sends one request per poll.
On a graceful stop <target.db> is left exactly as restored, so
"backupd replicate <target.db> <url>" can take over from it (promotion).
With --until T it shows the newest state at or before T and exits 0 once
the bucket holds a commit after T (time travel on a follower). With --json,
one JSON line per state applied goes to standard output.`,
  options,
  examples: [
    'backupd follow s3://my-bucket/app /srv/replica/app.db',
    'backupd follow s3://my-bucket/app ./app.db --poll 500ms --listen 127.0.0.1:9091',
    'backupd follow s3://my-bucket/app ./app.db --age-identity-file /etc/backupd/age-key.txt',
  ],
  run: follow,
});

/** How many polls in a row that fail the same way are logged once. */
const REPEAT_LOG_EVERY = 60;

/** `--poll`: a duration from 100ms to 1h. @throws UsageError */
function parsePoll(text: string): number {
  const parsed = parseDuration(text);
  if (typeof parsed === 'string') throw new UsageError(`--poll ${parsed}`);
  if (parsed < 100 || parsed > 3_600_000)
    throw new UsageError(`--poll must be between 100ms and 1h, got ${text}`);
  return parsed;
}

async function follow(context: CommandContextFor<typeof options>): Promise<number> {
  expectPositionals(context, 2);
  const { values } = context;
  const given = context.positionals[1];
  if (given === undefined) throw new UsageError('missing <target.db>');
  const target = resolve(context.cwd, given);
  const identities = commandLineIdentities({
    files: values['age-identity-file'],
    env: context.env,
    cwd: context.cwd,
  });
  const logger = createLogger({
    redactor: context.redactor,
    destination: context.stderr,
    ...(values['log-format'] ? { format: values['log-format'] } : {}),
    ...(values['log-level'] ? { level: values['log-level'] } : {}),
  });
  const opened = await openUrlArgument(context, 0);
  const replica = describeLocation(parseStoreUrl(opened.url));
  // One process writes a database file at a time: a follow, or a replicate.
  let lock: ReturnType<typeof lockDatabase>;
  try {
    lock = lockDatabase(target, [replica]);
  } catch (error) {
    if (!(error instanceof DatabaseInUseError)) throw error;
    logger.error({ event: 'backupd.follow_target_in_use', target, lock: error.lockFile });
    context.stderr.write(`backupd follow: ${error.message}\n`);
    return EXIT_DATABASE_IN_USE;
  }
  const store = new InstrumentedStore(opened.store);
  const stop = new AbortController();
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      logger.warn({
        event: 'backupd.second_signal',
        signal,
        note: 'exiting without the last write',
      });
      process.exit(EXIT_INTERRUPTED);
    }
    logger.info({ event: 'backupd.follow_stopping', signal });
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const startedAt = Date.now();
  // The same failure at every poll is logged when it starts and then every
  // REPEAT_LOG_EVERY polls, not once a second.
  let last = { text: '', count: 0 };
  const repeated = (text: string): { repeats?: number } | null => {
    last = text === last.text ? { text, count: last.count + 1 } : { text, count: 1 };
    if (last.count === 1) return {};
    return last.count % REPEAT_LOG_EVERY === 0 ? { repeats: last.count } : null;
  };
  const follower = followSqlite(store, opened.prefix, target, {
    identities,
    signal: stop.signal,
    force: values.force === true,
    ...(values.poll === undefined ? {} : { pollIntervalMs: values.poll }),
    ...(values.until === undefined ? {} : { until: values.until }),
    ...(values['latest-only'] === true ? { segments: false } : {}),
    onEvent: (event) => {
      if (event.kind === 'retrying') {
        const fields = errorFields(event.error);
        const repeats = repeated(`retrying ${String(fields.error)}`);
        if (repeats !== null)
          logger.warn({ event: 'backupd.follow_retrying', ...fields, ...repeats });
      } else if (event.kind === 'waiting') {
        const repeats = repeated(`waiting ${event.reason}`);
        if (repeats !== null)
          logger.info({ event: 'backupd.follow_waiting', reason: event.reason, ...repeats });
      } else if (event.kind === 'skipped')
        logger.warn({ event: 'backupd.follow_skipped', reason: event.reason });
      else logger.warn({ event: 'backupd.follow_lineage_changed', from: event.from, to: event.to });
    },
  });
  let stopped = false;
  const status = (): ReplicaStatus => {
    const lag = follower.lag();
    const healthy = !stopped && lag.applied !== null && lag.lastError === undefined;
    return {
      database: target,
      replica,
      healthy,
      ...(healthy
        ? {}
        : {
            reason: stopped ? 'stopped' : (lag.lastError ?? 'no state applied yet'),
          }),
      lagSeconds: Math.round(lag.lagSeconds * 10) / 10,
      unshippedBytes: 0,
      unrestorableCommits: 0,
      lastSuccessSeconds: lag.applied === null ? 0 : Math.floor(lag.applied.publishedAt / 1000),
      errors: 0,
      leaseHeld: false,
      ...(lag.applied === null
        ? {}
        : {
            latestRestorePoint: {
              commitSeq: lag.applied.commitSeq,
              key: lag.applied.manifestKey,
            },
          }),
      ...(lag.lastError === undefined ? {} : { lastError: lag.lastError }),
      follow: {
        appliedCommitSeq: lag.applied?.commitSeq ?? 0,
        commitsBehind: lag.commitsBehind,
        statesApplied: lag.statesApplied,
      },
      requests: store.counters,
      stopped,
    };
  };
  const server =
    values.listen === undefined
      ? null
      : await startStatusServer(
          values.listen,
          { statuses: () => [status()], version: VERSION, startedAt },
          context.redactor,
        );
  if (server) logger.info({ event: 'backupd.listening', url: server.url });
  logger.info({ event: 'backupd.follow_started', target, replica });
  try {
    for await (const state of follower) {
      logger.info({ event: 'backupd.follow_applied', ...stateFields(state) });
      if (values.json)
        context.stdout.write(
          context.redactor.text(
            `${JSON.stringify({ event: 'backupd.follow_applied', ...stateFields(state), lagSeconds: follower.lag().lagSeconds, commitsBehind: follower.lag().commitsBehind })}\n`,
          ),
        );
    }
    if (values.until !== undefined && !stop.signal.aborted) {
      const shown = follower.lag().applied;
      logger.info({
        event: 'backupd.follow_until_reached',
        target,
        until: new Date(values.until).toISOString(),
        commitSeq: shown?.commitSeq ?? null,
        commitTime: shown?.commitTime == null ? null : new Date(shown.commitTime).toISOString(),
        note: 'the bucket holds a commit after --until; the target shows the newest state before it, as a restore to that time does',
      });
      return EXIT_OK;
    }
    logger.info({
      event: 'backupd.follow_stopped',
      target,
      note:
        follower.lag().applied === null
          ? 'nothing was applied: the bucket held no state yet'
          : 'the target is as restored: backupd replicate can continue from it',
    });
    return EXIT_OK;
  } catch (error) {
    logger.error({ event: 'backupd.follow_failed', ...errorFields(error) });
    context.stderr.write(
      context.redactor.text(
        `backupd follow: ${error instanceof Error ? error.message : String(error)}\n`,
      ),
    );
    return FollowError.isInstance(error) ? EXIT_REFUSED : EXIT_FAILED;
  } finally {
    stopped = true;
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await server?.close();
    lock.release();
  }
}

function stateFields(state: FollowedState): Record<string, unknown> {
  return {
    commitSeq: state.commitSeq,
    commitTime: state.commitTime === null ? null : new Date(state.commitTime).toISOString(),
    commitsApplied: state.commitsApplied,
    walGeneration: state.walGeneration,
    manifestKey: state.manifestKey,
    objects: state.objects,
    bytes: state.bytes,
    pagesWritten: state.pagesWritten,
    applySeconds: (state.publishedAt - state.detectedAt) / 1000,
  };
}
