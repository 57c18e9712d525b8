import { describe, expect, it } from 'vitest';
import { FakeClock, systemClock } from './clock.ts';
import { LeaseWatch } from './watch.ts';

describe('FakeClock', () => {
  it('moves both clocks on advance and fires due timers in order, each at its due time', () => {
    const clock = new FakeClock({ wallMs: 1000, monotonicMs: 0 });
    const fired: [string, number, number][] = [];
    clock.setTimer(300, () => fired.push(['b', clock.monotonicNow(), clock.wallNow()]));
    clock.setTimer(100, () => {
      fired.push(['a', clock.monotonicNow(), clock.wallNow()]);
      clock.setTimer(100, () => fired.push(['c', clock.monotonicNow(), clock.wallNow()]));
    });
    const cancel = clock.setTimer(150, () => fired.push(['cancelled', 0, 0]));
    cancel();
    clock.advance(250);
    expect(fired).toEqual([
      ['a', 100, 1100],
      ['c', 200, 1200],
    ]);
    clock.advance(50);
    expect(fired.at(-1)).toEqual(['b', 300, 1300]);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('jumpWall moves only the wall clock, both ways', () => {
    const clock = new FakeClock({ wallMs: 10_000, monotonicMs: 5 });
    clock.jumpWall(-20_000);
    expect(clock.wallNow()).toBe(-10_000);
    expect(clock.monotonicNow()).toBe(5);
  });

  it('systemClock reads real time and cancels its timers', () => {
    expect(Math.abs(systemClock.wallNow() - Date.now())).toBeLessThan(1000);
    const cancel = systemClock.setTimer(10_000, () => {
      throw new Error('should have been cancelled');
    });
    cancel();
  });
});

describe('LeaseWatch', () => {
  it('counts how long one version was seen, and restarts on a change', () => {
    const watch = new LeaseWatch();
    expect(watch.observe('k', { etag: '"1"' }, 100)).toBe(0);
    expect(watch.observe('k', { etag: '"1"' }, 400)).toBe(300);
    expect(watch.observe('k', { etag: '"2"' }, 500)).toBe(0);
    expect(watch.sinceMonotonicMs).toBe(500);
    expect(watch.observe('other', { etag: '"2"' }, 600)).toBe(0);
    watch.reset();
    expect(watch.version).toBeUndefined();
  });
});
