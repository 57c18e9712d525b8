/**
 * Runs benchmarks: `pnpm bench [name ...] [--runs N] [--list]`.
 *
 * Each `bench/*.bench.ts` exports `benchmark` (see harness.ts). For each
 * selected benchmark: setup once in a fresh temp dir, N measured runs,
 * teardown and removal of the temp dir; then a table of median, min and max
 * per measurement on stdout, and a JSON file with every value and the
 * machine's description in bench/results/<name>-<timestamp>.json.
 *
 * With more than one benchmark selected, each runs in a process of its own
 * (this script again, with that one name): a benchmark may change its
 * process for good (sqlite-overhead lowers its CPU priority, as the daemon
 * does), and one's heap and JIT state should not weigh on the next.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { arch, cpus, loadavg, release, tmpdir, totalmem, type } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { Benchmark, BenchmarkContext, Measurement } from './harness.ts';

const benchDir = dirname(fileURLToPath(import.meta.url));
const resultsDir = join(benchDir, 'results');

interface Summary {
  unit: string;
  higherIsBetter: boolean;
  median: number;
  min: number;
  max: number;
  values: number[];
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

function machine(): Record<string, string | number> {
  const processors = cpus();
  return {
    cpuModel: processors[0]?.model.trim() ?? 'unknown',
    cores: processors.length,
    memoryBytes: totalmem(),
    node: process.version,
    os: `${type()} ${release()} ${arch()}`,
    // Other processes compete for the CPU: the 1-minute load average says how much.
    loadAverage1m: loadavg()[0] ?? 0,
  };
}

async function discover(): Promise<Map<string, Benchmark<unknown>>> {
  const found = new Map<string, Benchmark<unknown>>();
  const files = (await readdir(benchDir)).filter((file) => file.endsWith('.bench.ts')).sort();
  for (const file of files) {
    // Importing runs a module's top level: only import files written for this harness.
    const text = await readFile(join(benchDir, file), 'utf8');
    if (!/^export const benchmark\b/m.test(text)) {
      process.stderr.write(
        `skipping ${file}: it does not export \`benchmark\` (see bench/README.md)\n`,
      );
      continue;
    }
    const module = (await import(pathToFileURL(join(benchDir, file)).href)) as {
      benchmark?: Benchmark<unknown>;
    };
    if (module.benchmark === undefined) {
      throw new Error(`${file} does not export \`benchmark\` (see bench/README.md)`);
    }
    if (found.has(module.benchmark.name)) {
      throw new Error(`two benchmarks are named ${module.benchmark.name}`);
    }
    found.set(module.benchmark.name, module.benchmark);
    found.set(basename(file, '.bench.ts'), module.benchmark);
  }
  return found;
}

function format(value: number): string {
  if (Math.abs(value) >= 100) return value.toFixed(0);
  if (Math.abs(value) >= 1) return value.toFixed(2);
  return value.toPrecision(3);
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows
    .map((row, index) => {
      const line = row
        .map((cell, column) =>
          column < 3 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!),
        )
        .join('  ');
      return index === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : line;
    })
    .join('\n');
}

async function runOne(
  benchmark: Benchmark<unknown>,
  runs: number,
): Promise<Record<string, Summary>> {
  const tempDir = await mkdtemp(join(tmpdir(), `bench-${benchmark.name}-`));
  const context: BenchmarkContext = {
    tempDir,
    log: (message) => process.stderr.write(`[${benchmark.name}] ${message}\n`),
  };
  const collected: Record<string, Measurement[]> = {};
  try {
    context.log('setup');
    const state = await benchmark.setup(context);
    try {
      for (let run = 1; run <= runs; run++) {
        const measured = await benchmark.run(state, context);
        context.log(
          `run ${run}/${runs}: ${Object.entries(measured)
            .map(([name, m]) => `${name} ${format(m.value)} ${m.unit}`)
            .join(', ')}`,
        );
        for (const [name, measurement] of Object.entries(measured)) {
          const list = collected[name] ?? [];
          list.push(measurement);
          collected[name] = list;
        }
      }
    } finally {
      await benchmark.teardown?.(state, context);
    }
  } finally {
    await rm(tempDir, { recursive: true, force: true });
  }
  const summaries: Record<string, Summary> = {};
  for (const [name, measurements] of Object.entries(collected)) {
    const values = measurements.map((m) => m.value);
    summaries[name] = {
      unit: measurements[0]!.unit,
      higherIsBetter: measurements[0]!.higherIsBetter ?? true,
      median: median(values),
      min: Math.min(...values),
      max: Math.max(...values),
      values,
    };
  }
  return summaries;
}

async function main(): Promise<void> {
  const { values: options, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      runs: { type: 'string' },
      list: { type: 'boolean', default: false },
    },
  });
  const all = await discover();
  const unique = [...new Set(all.values())];
  if (options.list) {
    for (const benchmark of unique) console.log(`${benchmark.name}  ${benchmark.description}`);
    return;
  }
  const selected =
    positionals.length === 0
      ? unique
      : positionals.map((name) => {
          const benchmark = all.get(name);
          if (benchmark === undefined) {
            throw new Error(
              `no benchmark named ${name}; known: ${unique.map((b) => b.name).join(', ')}`,
            );
          }
          return benchmark;
        });
  const runsOverride = options.runs === undefined ? undefined : Number(options.runs);
  if (runsOverride !== undefined && (!Number.isInteger(runsOverride) || runsOverride < 1)) {
    throw new Error(`--runs must be a positive integer, got ${options.runs}`);
  }
  if (selected.length > 1) {
    let failed = 0;
    for (const benchmark of selected) {
      const code = await new Promise<number | null>((resolve, reject) => {
        const child = spawn(
          process.execPath,
          [
            ...process.execArgv,
            fileURLToPath(import.meta.url),
            benchmark.name,
            ...(options.runs === undefined ? [] : ['--runs', options.runs]),
          ],
          { stdio: 'inherit' },
        );
        child.on('error', reject);
        child.on('exit', resolve);
      });
      if (code !== 0) {
        failed += 1;
        process.stderr.write(`[${benchmark.name}] failed (exit ${code})\n`);
      }
    }
    if (failed > 0) process.exitCode = 1;
    return;
  }
  await mkdir(resultsDir, { recursive: true });
  const rows: string[][] = [['benchmark', 'measurement', 'unit', 'median', 'min', 'max', 'runs']];
  for (const benchmark of selected) {
    const runs = runsOverride ?? benchmark.runs ?? 5;
    const startedAt = new Date();
    const loadAtStart = loadavg()[0] ?? 0;
    const summaries = await runOne(benchmark, runs);
    const finishedAt = new Date();
    for (const [name, summary] of Object.entries(summaries)) {
      rows.push([
        benchmark.name,
        name,
        summary.unit,
        format(summary.median),
        format(summary.min),
        format(summary.max),
        String(runs),
      ]);
    }
    const file = join(
      resultsDir,
      `${benchmark.name}-${startedAt
        .toISOString()
        .replaceAll(':', '-')
        .replace(/\.\d+Z$/, 'Z')}.json`,
    );
    const report = {
      benchmark: benchmark.name,
      description: benchmark.description,
      startedAt: startedAt.toISOString(),
      finishedAt: finishedAt.toISOString(),
      runs,
      machine: { ...machine(), loadAverage1mAtStart: loadAtStart },
      measurements: summaries,
    };
    await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
    process.stderr.write(`[${benchmark.name}] wrote ${file}\n`);
  }
  console.log(table(rows));
}

await main();
