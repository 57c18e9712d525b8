/**
 * The benchmark harness's types. A benchmark is a file `bench/<name>.bench.ts`
 * that exports `benchmark = defineBenchmark({...})`; `bench/run.ts` finds,
 * runs and reports it. See bench/README.md.
 */

/** One measured value of one run. */
export interface Measurement {
  value: number;
  /** What `value` counts, e.g. `MB/s` (10^6 bytes per second) or `ms`. */
  unit: string;
  /** For the table's reader: whether a larger value is better. Default true. */
  higherIsBetter?: boolean;
}

/** What the harness gives a benchmark. */
export interface BenchmarkContext {
  /** A fresh directory for this benchmark's inputs, removed after its last run (even on failure). */
  tempDir: string;
  /** Progress output (stderr), so generation steps of minutes are visible. */
  log(message: string): void;
}

export interface Benchmark<State> {
  /** Unique, kebab-case; `pnpm bench <name>` selects it; results go to `bench/results/<name>-<time>.json`. */
  name: string;
  /** One sentence: what is measured, over what input. */
  description: string;
  /** Runs to take the median of (default 5, or `--runs N`). */
  runs?: number;
  /** Builds the input once (not measured). */
  setup(context: BenchmarkContext): Promise<State>;
  /** One measured run: returns named measurements (every run must return the same names). */
  run(state: State, context: BenchmarkContext): Promise<Record<string, Measurement>>;
  /** Releases what setup holds besides files in `tempDir` (which the harness removes). */
  teardown?(state: State, context: BenchmarkContext): Promise<void>;
}

/** Identity, for type inference of `State` in a benchmark file. */
export function defineBenchmark<State>(benchmark: Benchmark<State>): Benchmark<State> {
  return benchmark;
}

/** Bytes per second as MB/s (10^6 bytes), from a byte count and elapsed nanoseconds. */
export function megabytesPerSecond(bytes: number, elapsedNanoseconds: bigint): Measurement {
  return { value: bytes / 1e6 / (Number(elapsedNanoseconds) / 1e9), unit: 'MB/s' };
}
