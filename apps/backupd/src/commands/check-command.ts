/**
 * `backupd check <url>`: measures, on the live service, whether it gives real
 * single-writer exclusion. Runs the conditional-write probe and the
 * conformance cases under a scratch prefix (`<prefix>/.backupd-check-<random>`)
 * and deletes what it wrote there; it never touches anything else.
 *
 * Cleanup does not trust the service's listing: every key written is
 * remembered and deleted, and the scratch prefix is swept once more at the
 * end. Every cleanup failure is reported, with what was left where.
 *
 * Exit 0 only when create-if-absent and replace-if-version are honoured and
 * nothing was left under the scratch prefix.
 */
import { randomBytes } from 'node:crypto';
import type { ObjectStore } from '@x/store';
import {
  type CaseResult,
  type CleanupFailure,
  cleanUpPrefix,
  describeCleanupFailure,
  KeyRecordingStore,
  type ProbeReport,
  probeConditionalWrites,
  runConformanceCases,
  type VerdictOutcome,
} from '@x/store-conformance';
import { BEST_EFFORT_ADVICE } from '../best-effort-advice.ts';
import { type CommandContextFor, defineCommand, type NoOptions } from '../cli/command.ts';
import { EXIT_FAILED, EXIT_OK } from '../exit-codes.ts';
import { expectPositionals, openUrlArgument, print, printJson, table } from './command-store.ts';

export interface CheckCleanup {
  /** True when nothing is known to be left under `prefix` and no cleanup step failed. */
  readonly clean: boolean;
  /** The scratch prefix. */
  readonly prefix: string;
  /** Objects left under it after the final sweep (a lower bound when `listed` is false). */
  readonly left: number;
  /** False when the final sweep could not list the prefix. */
  readonly listed: boolean;
  /** Every cleanup that failed along the way (probe, cases, final sweep), for a person. */
  readonly failures: readonly string[];
}

export interface CheckVerdict {
  readonly safe: boolean;
  readonly exclusion: 'conditional' | 'none';
  readonly probe: ProbeReport;
  readonly cases: readonly CaseResult[];
  readonly cleanup: CheckCleanup;
  readonly summary: string;
}

/**
 * What a verdict other than `honoured` means for backupd, where it matters
 * though the lease does not rest on it. The lease never deletes: release
 * writes a released record with replace-if-version (`If-Match`), and
 * retention deletes unconditionally under the lease.
 */
function notes(probe: ProbeReport): string[] {
  const result: string[] = [];
  if (probe.delete.outcome !== 'honoured')
    result.push(
      `delete-if-version is ${probe.delete.outcome}; backupd does not use it: the lease is released by writing a released record with replace-if-version (If-Match), never by a delete`,
    );
  if (probe.multipartCreate && probe.multipartCreate.outcome !== 'honoured')
    result.push(
      `create-if-absent at multipart completion is ${probe.multipartCreate.outcome}: a snapshot or archive larger than one part is checked absent before its upload but not refused when the upload completes`,
    );
  return result;
}

function unsafeReasons(probe: ProbeReport, failedCases: number): string {
  const named: [string, VerdictOutcome][] = [
    ['create-if-absent', probe.create.outcome],
    ['replace-if-version', probe.replace.outcome],
  ];
  const reasons = named
    .filter(([, outcome]) => outcome !== 'honoured')
    .map(([name, outcome]) => `${name} ${outcome}`);
  if (failedCases > 0)
    reasons.push(`${failedCases} conformance case${failedCases === 1 ? '' : 's'} failed`);
  return reasons.join(', ');
}

/** The summary's line about the scratch prefix, when its cleanup failed; `undefined` when clean. */
export function cleanupLine(cleanup: CheckCleanup): string | undefined {
  if (cleanup.clean) return undefined;
  const where = `${cleanup.prefix}/`;
  if (!cleanup.listed && cleanup.left === 0)
    return `cleanup FAILED: ${where} could not be listed, so objects may be left there; check it and delete that prefix by hand`;
  const count = `${cleanup.left} object${cleanup.left === 1 ? '' : 's'}`;
  return cleanup.listed
    ? `cleanup FAILED: ${count} left under ${where}; delete that prefix by hand`
    : `cleanup FAILED: at least ${count} left under ${where} (the prefix could not be listed: more may be there); delete that prefix by hand`;
}

export const checkCommand = defineCommand({
  name: 'check',
  synopsis: 'check <url>',
  summary: 'test whether a bucket gives real single-writer exclusion',
  usage: 'Usage: backupd check <url> [--json]',
  description: `Runs the conditional-write probe and the conformance cases against the live
bucket, under a scratch prefix it deletes afterwards, and says whether this
service gives real single-writer exclusion. Exit code 0 when it does.`,
  options: {},
  examples: [
    "backupd check 's3://my-bucket/scratch?endpoint=https://ACCOUNT.r2.cloudflarestorage.com&region=auto'",
    'backupd check az://backups/scratch',
  ],
  run: checkExclusion,
});

async function checkExclusion(context: CommandContextFor<NoOptions>): Promise<number> {
  expectPositionals(context, 1);
  const opened = await openUrlArgument(context, 0);
  const unreachable = await firstWriteProblem(opened.store, opened.prefix);
  if (unreachable !== null) {
    const summary = `${opened.url}: NOT CHECKED — ${unreachable}; nothing was measured`;
    if (context.values.json) printJson(context, { checked: false, safe: false, summary });
    else print(context, summary);
    return EXIT_FAILED;
  }
  const { probe, cases, cleanup } = await measure(opened.store, opened.prefix);
  const verdict = judge(opened.url, probe, cases, cleanup);
  if (context.values.json) printJson(context, verdict);
  else print(context, verdictText(verdict));
  return verdict.safe && cleanup.clean ? EXIT_OK : EXIT_FAILED;
}

/**
 * One small write and its delete under a scratch key, before anything is
 * measured: wrong credentials or a missing bucket are then said as such
 * instead of being read as ignored preconditions. `null` when both work.
 */
async function firstWriteProblem(store: ObjectStore, prefix: string): Promise<string | null> {
  const key = `${prefix}/.backupd-check-${randomBytes(6).toString('hex')}-reach`;
  const signal = AbortSignal.timeout(60_000);
  try {
    await store.put(key, new TextEncoder().encode('backupd check'), { signal });
  } catch (error) {
    return `the first write failed (${messageOf(error)}): check the credentials, that the bucket exists, and that they may write under this prefix (nothing was written)`;
  }
  try {
    await store.delete(key, { signal });
  } catch (error) {
    return `a write worked but its delete failed (${messageOf(error)}): the credentials may not delete, which retention needs; delete ${key} by hand`;
  }
  return null;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The probe and the cases under a scratch prefix of `prefix`, then the sweep of everything they wrote. */
async function measure(
  bare: ObjectStore,
  prefix: string,
): Promise<{ probe: ProbeReport; cases: readonly CaseResult[]; cleanup: CheckCleanup }> {
  // Every key the probe and the cases write, for the final sweep.
  const store = new KeyRecordingStore(bare);
  const scratch = `${prefix}/.backupd-check-${randomBytes(6).toString('hex')}`;
  const signal = AbortSignal.timeout(10 * 60_000);
  const probe = await probeConditionalWrites(store, `${scratch}/probe`, { signal });
  // The cases test what the service is asked to do; declaring everything on
  // makes a service that ignores a precondition fail the matching cases.
  const cases = await runConformanceCases(store, {
    prefix: `${scratch}/cases`,
    capabilities: { conditionalPut: true, conditionalDelete: true, multipartCreate: true },
    signal,
  });
  // The final sweep runs on its own deadline: the run's may be nearly spent.
  const sweep = await cleanUpPrefix(
    bare,
    scratch,
    store.written(),
    AbortSignal.timeout(5 * 60_000),
  ).catch(
    (error: unknown): CleanupFailure => ({
      prefix: scratch,
      left: 0,
      sample: [],
      listed: false,
      errors: [error instanceof Error ? `${error.name}: ${error.message}` : String(error)],
    }),
  );
  const failures = [
    ...(probe.cleanup ? [`probe: ${describeCleanupFailure(probe.cleanup)}`] : []),
    ...cases.flatMap((result) =>
      result.cleanup
        ? [`${result.group}: ${result.name}: ${describeCleanupFailure(result.cleanup)}`]
        : [],
    ),
    ...(sweep ? [`final sweep: ${describeCleanupFailure(sweep)}`] : []),
  ];
  const cleanup: CheckCleanup = {
    clean: sweep === undefined,
    prefix: scratch,
    left: sweep?.left ?? 0,
    listed: sweep?.listed ?? true,
    failures,
  };
  return { probe, cases, cleanup };
}

/** The conformance groups whose failure means two writers could both win. */
const EXCLUSION_GROUPS = new Set<CaseResult['group']>([
  'create',
  'replace',
  'races',
  'multipart-create',
]);

/**
 * SAFE only when create-if-absent and replace-if-version are honoured and
 * no case of those preconditions (or their races) failed; the summary adds what was left behind.
 */
export function judge(
  url: string,
  probe: ProbeReport,
  cases: readonly CaseResult[],
  cleanup: CheckCleanup,
): CheckVerdict {
  // SAFE is about exclusion: the cases of the preconditions the lease rests on.
  const failedCases = cases.filter(
    (result) => result.outcome === 'failed' && EXCLUSION_GROUPS.has(result.group),
  ).length;
  const safe =
    probe.create.outcome === 'honoured' &&
    probe.replace.outcome === 'honoured' &&
    failedCases === 0;
  const extra = notes(probe);
  const summary = safe
    ? `${url}: SAFE — the service honours create-if-absent and replace-if-version; the lease gives real exclusion${
        extra.length > 0 ? ` (${extra.join('; ')})` : ''
      }`
    : `${url}: UNSAFE — ${unsafeReasons(probe, failedCases)}: two writers could corrupt a backup; backupd refuses to run here unless you ${BEST_EFFORT_ADVICE}`;
  const leftLine = cleanupLine(cleanup);
  return {
    safe,
    exclusion: safe ? 'conditional' : 'none',
    probe,
    cases,
    cleanup,
    summary: leftLine ? `${summary}\n${leftLine}` : summary,
  };
}

/** The text report: the probe's table, the cases, every cleanup failure, the summary. */
function verdictText({ probe, cases, cleanup, summary }: CheckVerdict): string {
  const probeRows = (['create', 'replace', 'delete', 'multipartCreate'] as const)
    .filter((name) => probe[name] !== undefined)
    .map((name) => [name, probe[name]!.outcome, probe[name]!.evidence]);
  const failed = cases.filter((result) => result.outcome === 'failed');
  const lines = [table(['PRECONDITION', 'VERDICT', 'EVIDENCE'], probeRows), ''];
  lines.push(
    `conformance: ${cases.filter((result) => result.outcome === 'passed').length} passed, ${failed.length} failed, ${cases.filter((result) => result.outcome === 'not-applicable').length} not applicable`,
  );
  for (const result of failed)
    lines.push(`  FAILED ${result.group}: ${result.name}: ${result.detail ?? ''}`);
  if (cleanup.failures.length > 0) {
    lines.push('', `cleanup of ${cleanup.prefix}/: ${cleanup.failures.length} failure(s)`);
    for (const failure of cleanup.failures) lines.push(`  ${failure}`);
  }
  // The summary carries the cleanup line, when there is one, on its own line.
  lines.push('', summary);
  return lines.join('\n');
}
