/** Driving a started worker on a fake clock: real event-loop turns between small clock advances. */
import type { FakeClock } from '@x/lease';

export function turn(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * Advances `clock` by `stepMs` between real event-loop turns until
 * `condition` holds; throws after `maxMs` of fake time. Returns the fake
 * time it took.
 */
export async function waitFor(
  clock: FakeClock,
  condition: () => boolean | Promise<boolean>,
  options: { stepMs?: number; maxMs?: number; what?: string } = {},
): Promise<number> {
  const stepMs = options.stepMs ?? 100;
  const maxMs = options.maxMs ?? 120_000;
  let elapsed = 0;
  for (;;) {
    for (let i = 0; i < 5; i += 1) await turn();
    if (await condition()) return elapsed;
    if (elapsed >= maxMs) throw new Error(`timed out waiting for ${options.what ?? 'a condition'}`);
    clock.advance(stepMs);
    elapsed += stepMs;
  }
}
