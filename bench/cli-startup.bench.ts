/**
 * How long the `backupd` command takes to start, as an operator runs it:
 * `node_modules/.bin/backupd --help` and `backupd ls file://…` on an empty
 * prefix, each a process of its own, wall time from spawn to exit. Measured
 * for the bundle (what a fresh install runs) and for the TypeScript sources
 * (what an edited checkout runs, `BACKUPD_FROM_SOURCES=1`), beside `node -e 0`
 * (Node's own start-up on this machine). The bundle must be built and fresh
 * (`pnpm install` builds it); the benchmark refuses to run otherwise.
 */
import { spawnSync } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { defineBenchmark, type Measurement } from './harness.ts';

const BIN = fileURLToPath(new URL('../node_modules/.bin/backupd', import.meta.url));
/** Processes per measurement and run; the run's value is their median. */
const SAMPLES = 5;

interface State {
  readonly prefixUrl: string;
}

function wallMs(command: string, args: readonly string[], env: NodeJS.ProcessEnv): number {
  const started = process.hrtime.bigint();
  const result = spawnSync(command, args, { env, encoding: 'utf8' });
  const elapsed = Number(process.hrtime.bigint() - started) / 1e6;
  if (result.status !== 0)
    throw new Error(`${command} ${args.join(' ')} exited ${result.status}: ${result.stderr}`);
  return elapsed;
}

function medianMs(sample: () => number): Measurement {
  const values = Array.from({ length: SAMPLES }, sample).sort((a, b) => a - b);
  return { value: values[SAMPLES >> 1]!, unit: 'ms', higherIsBetter: false };
}

export const benchmark = defineBenchmark<State>({
  name: 'cli-startup',
  description:
    'Wall time of `backupd --help` and `backupd ls file://` (empty prefix), bundle vs sources, beside `node -e 0`',
  async setup(context) {
    const probe = spawnSync(BIN, ['--version'], {
      env: { ...process.env, BACKUPD_DEBUG: '1' },
      encoding: 'utf8',
    });
    if (!probe.stderr.includes('running from the bundle'))
      throw new Error(
        `the bundle is missing or stale (${probe.stderr.trim()}): run pnpm install or pnpm --filter backupd bundle`,
      );
    const prefix = join(context.tempDir, 'empty');
    await mkdir(prefix);
    return { prefixUrl: pathToFileURL(prefix).href };
  },
  async run(state) {
    const bundle = { ...process.env, BACKUPD_FROM_SOURCES: '0' };
    const sources = { ...process.env, BACKUPD_FROM_SOURCES: '1' };
    return {
      'node -e 0': medianMs(() => wallMs(process.execPath, ['-e', '0'], process.env)),
      'help (bundle)': medianMs(() => wallMs(BIN, ['--help'], bundle)),
      'ls file:// (bundle)': medianMs(() => wallMs(BIN, ['ls', state.prefixUrl], bundle)),
      'help (sources)': medianMs(() => wallMs(BIN, ['--help'], sources)),
      'ls file:// (sources)': medianMs(() => wallMs(BIN, ['ls', state.prefixUrl], sources)),
    };
  },
});
