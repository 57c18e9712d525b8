/**
 * `backupd check <url>`: measures, on the live service, whether it gives real
 * single-writer exclusion. Runs the conditional-write probe and the
 * conformance cases under a scratch prefix (`<prefix>/.backupd-check-<random>`)
 * and deletes what it wrote there; it never touches anything else.
 * Exit 0 only when create-if-absent and replace-if-version are honoured.
 */
import { randomBytes } from 'node:crypto';
import {
  type CaseResult,
  type ProbeReport,
  probeConditionalWrites,
  runConformanceCases,
} from '@x/store-conformance';
import { EXIT_FAILED, EXIT_OK } from '../exit-codes.ts';
import type { CommandContext } from '../main.ts';
import { expectPositionals, openUrlArgument, print, printJson, table } from './shared.ts';

export interface CheckVerdict {
  readonly safe: boolean;
  readonly exclusion: 'conditional' | 'none';
  readonly probe: ProbeReport;
  readonly cases: readonly CaseResult[];
  readonly summary: string;
}

export async function checkCommand(context: CommandContext): Promise<number> {
  expectPositionals(context, 1);
  const { store, prefix, url } = await openUrlArgument(context, 0);
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
  const safe = probe.create.outcome === 'honoured' && probe.replace.outcome === 'honoured';
  const failed = cases.filter((result) => result.outcome === 'failed');
  const summary = safe
    ? `${url}: SAFE — the service honours create-if-absent and replace-if-version; the lease gives real exclusion${
        probe.delete.outcome === 'honoured'
          ? ''
          : ` (delete-if-version is ${probe.delete.outcome}: release falls back to read-check-delete)`
      }`
    : `${url}: UNSAFE — ${[
        probe.create.outcome !== 'honoured' ? `create-if-absent ${probe.create.outcome}` : '',
        probe.replace.outcome !== 'honoured' ? `replace-if-version ${probe.replace.outcome}` : '',
      ]
        .filter(Boolean)
        .join(
          ', ',
        )}: two writers could corrupt a backup; backupd refuses to run here unless the lease is set best-effort (conditional: false)`;
  const verdict: CheckVerdict = {
    safe,
    exclusion: safe ? 'conditional' : 'none',
    probe,
    cases,
    summary,
  };
  if (context.values.json) {
    printJson(context, verdict);
  } else {
    const probeRows = (['create', 'replace', 'delete', 'multipartCreate'] as const)
      .filter((name) => probe[name] !== undefined)
      .map((name) => [name, probe[name]!.outcome, probe[name]!.evidence]);
    const lines = [table(['PRECONDITION', 'VERDICT', 'EVIDENCE'], probeRows), ''];
    lines.push(
      `conformance: ${cases.filter((result) => result.outcome === 'passed').length} passed, ${failed.length} failed, ${cases.filter((result) => result.outcome === 'not-applicable').length} not applicable`,
    );
    for (const result of failed)
      lines.push(`  FAILED ${result.group}: ${result.name}: ${result.detail ?? ''}`);
    if (probe.cleanupError)
      lines.push(`warning: could not delete the scratch prefix ${scratch}: ${probe.cleanupError}`);
    lines.push('', summary);
    print(context, lines.join('\n'));
  }
  return safe ? EXIT_OK : EXIT_FAILED;
}
