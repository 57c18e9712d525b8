import { describe, expect, it } from 'vitest';
import { raceAbort, withRetries } from './retry.ts';

const fast = { maxRetries: 2, initialDelayMs: 1, maxDelayMs: 2 };
const transient = (): Error => Object.assign(new Error('unavailable'), { code: 503 });

describe('withRetries', () => {
  it('retries transient failures and returns the first success', async () => {
    const attempts: number[] = [];
    const result = await withRetries(fast, undefined, async (attempt) => {
      attempts.push(attempt);
      if (attempt < 3) throw transient();
      return 'done';
    });
    expect(result).toBe('done');
    expect(attempts).toEqual([1, 2, 3]);
  });

  it('gives up after maxRetries and rethrows the last failure', async () => {
    let attempts = 0;
    await expect(
      withRetries(fast, undefined, async () => {
        attempts += 1;
        throw transient();
      }),
    ).rejects.toThrow('unavailable');
    expect(attempts).toBe(3);
  });

  it('does not retry a refusal', async () => {
    let attempts = 0;
    const refusal = Object.assign(new Error('Precondition failed'), { code: 412 });
    await expect(
      withRetries(fast, undefined, async () => {
        attempts += 1;
        throw refusal;
      }),
    ).rejects.toBe(refusal);
    expect(attempts).toBe(1);
  });

  it('stops retrying and rejects with the reason when the signal fires', async () => {
    const controller = new AbortController();
    const reason = new Error('fenced');
    let attempts = 0;
    await expect(
      withRetries(
        { maxRetries: 5, initialDelayMs: 10_000, maxDelayMs: 10_000 },
        controller.signal,
        async () => {
          attempts += 1;
          setTimeout(() => controller.abort(reason), 1);
          throw transient();
        },
      ),
    ).rejects.toBe(reason);
    expect(attempts).toBe(1);
  });
});

describe('raceAbort', () => {
  it('rejects at once with the reason while the work is still pending', async () => {
    const controller = new AbortController();
    const reason = new Error('stop');
    const pending = new Promise<string>(() => {});
    const raced = raceAbort(pending, controller.signal);
    controller.abort(reason);
    await expect(raced).rejects.toBe(reason);
  });

  it('passes a result through when the signal does not fire', async () => {
    await expect(raceAbort(Promise.resolve(7), new AbortController().signal)).resolves.toBe(7);
  });
});
