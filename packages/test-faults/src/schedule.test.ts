import { describe, expect, it } from 'vitest';
import { type FaultSchedule, FaultScheduleError, ScheduleRunner, uniform } from './schedule.ts';

function kinds(runner: ScheduleRunner, calls: readonly [string, string][]): string[] {
  return calls.map(([method, path]) => runner.decide(method, path).fault?.kind ?? '-');
}

const calls: [string, string][] = Array.from({ length: 200 }, (_, index) => [
  index % 3 === 0 ? 'GET' : 'PUT',
  `/bucket/key-${index % 7}`,
]);

const coinFlips: FaultSchedule = {
  rules: [
    { kind: 'error503', probability: 0.3 },
    { kind: 'reset', methods: ['put'], probability: 0.3 },
  ],
};

describe('ScheduleRunner', () => {
  it('decides the same faults for the same seed and request order', () => {
    const first = kinds(new ScheduleRunner(coinFlips, 42, { caseInsensitiveMethods: true }), calls);
    const second = kinds(
      new ScheduleRunner(coinFlips, 42, { caseInsensitiveMethods: true }),
      calls,
    );
    expect(second).toEqual(first);
    expect(first.filter((kind) => kind === 'error503').length).toBeGreaterThan(30);
    expect(first.filter((kind) => kind === 'reset').length).toBeGreaterThan(10);
  });

  it('decides differently for another seed (the determinism check is not vacuous)', () => {
    const first = kinds(new ScheduleRunner(coinFlips, 42, { caseInsensitiveMethods: true }), calls);
    const other = kinds(new ScheduleRunner(coinFlips, 43, { caseInsensitiveMethods: true }), calls);
    expect(other).not.toEqual(first);
  });

  it("keeps a rule's decisions for its own requests when unrelated requests come between them", () => {
    const schedule: FaultSchedule = {
      rules: [{ kind: 'error500', methods: ['PUT'], probability: 0.5 }],
    };
    const puts: [string, string][] = Array.from({ length: 50 }, (_, index) => [
      'PUT',
      `/k${index}`,
    ]);
    const interleaved = puts.flatMap((put, index): [string, string][] =>
      index % 2 === 0 ? [put, ['GET', '/other']] : [put],
    );
    const alone = kinds(new ScheduleRunner(schedule, 7, { caseInsensitiveMethods: true }), puts);
    const mixed = kinds(
      new ScheduleRunner(schedule, 7, { caseInsensitiveMethods: true }),
      interleaved,
    );
    expect(mixed.filter((_, index) => interleaved[index]![0] === 'PUT')).toEqual(alone);
  });

  it('matches by method and path, honours skip and limit', () => {
    const runner = new ScheduleRunner(
      { rules: [{ kind: 'conflict', methods: ['PUT'], path: /LEASE$/, skip: 1, limit: 2 }] },
      1,
      { caseInsensitiveMethods: true },
    );
    const decided = kinds(runner, [
      ['PUT', '/b/p/LEASE'], // skipped
      ['GET', '/b/p/LEASE'], // wrong method
      ['PUT', '/b/p/other'], // wrong path
      ['put', '/b/p/LEASE'], // fires (methods are case-insensitive for the proxy)
      ['PUT', '/b/p/LEASE'], // fires
      ['PUT', '/b/p/LEASE'], // limit reached
    ]);
    expect(decided).toEqual(['-', '-', '-', 'conflict', 'conflict', '-']);
  });

  it('adds every latency that fires and lets the first terminal rule win', () => {
    const runner = new ScheduleRunner(
      {
        rules: [
          { kind: 'latency', latencyMs: 10 },
          { kind: 'lostResponse' },
          { kind: 'latency', latencyMs: [20, 30] },
          { kind: 'reset' },
        ],
      },
      5,
      { caseInsensitiveMethods: true },
    );
    const decision = runner.decide('PUT', '/x');
    expect(decision.fault?.kind).toBe('lostResponse');
    expect(decision.latencies.map((latency) => latency.rule)).toEqual([0, 2]);
    expect(decision.latencyMs).toBeGreaterThanOrEqual(30);
    expect(decision.latencyMs).toBeLessThanOrEqual(40);
  });

  it('refuses a bad schedule or seed with FaultScheduleError naming the field', () => {
    const bad =
      (schedule: unknown, seed = 1) =>
      () =>
        new ScheduleRunner(schedule as FaultSchedule, seed, { caseInsensitiveMethods: true });
    expect(bad({ rules: [{ kind: 'explode' }] })).toThrow(/rules\[0\]\.kind/);
    expect(bad({ rules: [{ kind: 'reset', probability: 2 }] })).toThrow(/probability/);
    expect(bad({ rules: [{ kind: 'latency', latencyMs: [5, 1] }] })).toThrow(/latencyMs/);
    expect(bad({ rules: [] }, 1.5)).toThrow(FaultScheduleError);
    expect(bad({})).toThrow(/rules array/);
  });

  it('spreads its uniform draws over [0, 1)', () => {
    const draws = Array.from({ length: 10_000 }, (_, index) => uniform(9, 0, index, 1));
    const mean = draws.reduce((sum, value) => sum + value, 0) / draws.length;
    expect(Math.min(...draws)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...draws)).toBeLessThan(1);
    expect(mean).toBeGreaterThan(0.48);
    expect(mean).toBeLessThan(0.52);
  });
});
