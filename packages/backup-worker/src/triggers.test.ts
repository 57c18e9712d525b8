import { FakeClock } from '@x/lease';
import { describe, expect, it } from 'vitest';
import { Triggers } from './triggers.ts';

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}

describe('Triggers', () => {
  it('a wait ends after its time on the injected clock', async () => {
    const clock = new FakeClock();
    const triggers = new Triggers(clock);
    let woke = false;
    void triggers.sleep(1_000).then(() => {
      woke = true;
    });
    clock.advance(999);
    await settle();
    expect(woke).toBe(false);
    clock.advance(1);
    await settle();
    expect(woke).toBe(true);
  });

  it('a trigger ends a pending wait at once and cancels its timer', async () => {
    const clock = new FakeClock();
    const triggers = new Triggers(clock);
    let woke = false;
    void triggers.sleep(60_000).then(() => {
      woke = true;
    });
    triggers.trigger('snapshot');
    await settle();
    expect(woke).toBe(true);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('a trigger while nothing waits ends the next wait at once, once', async () => {
    const clock = new FakeClock();
    const triggers = new Triggers(clock);
    triggers.trigger('snapshot');
    await triggers.sleep(60_000);
    let second = false;
    void triggers.sleep(1_000).then(() => {
      second = true;
    });
    await settle();
    expect(second).toBe(false);
  });

  it('a shutdown is requested once and resolves the shutdown signal', async () => {
    const triggers = new Triggers(new FakeClock());
    expect(triggers.shutdownRequested).toBe(false);
    triggers.trigger('shutdown');
    triggers.trigger('shutdown');
    expect(triggers.shutdownRequested).toBe(true);
    await triggers.shutdownSignal;
  });
});
