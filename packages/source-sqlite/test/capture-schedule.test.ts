/**
 * The capture timer comes back when the WAL will have grown by the target at
 * the rate it grew since the previous tick, so a fast-growing WAL is visited
 * before it passes the restart threshold.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CAPTURE_TICK_MAX_FRAMES,
  captureTickTargetFrames,
  DEFAULT_CAPTURE_INTERVAL_MS,
  nextCaptureDelayMs,
  SqliteSource,
} from '../src/sqlite-source.ts';
import { openApplicationDatabase } from './harness.ts';

const cleanups: (() => void)[] = [];
afterEach(() => {
  vi.useRealTimers();
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

const base = { targetFrames: 400, intervalMs: 100 };

describe('nextCaptureDelayMs', () => {
  it('waits the whole interval when the WAL did not grow', () => {
    expect(nextCaptureDelayMs({ ...base, framesBefore: 50, framesAfter: 50, elapsedMs: 100 })).toBe(
      100,
    );
  });

  it('uses the time actually passed, not the interval, for the rate', () => {
    // 400 frames in 10 ms: the next 400 come in about 10 ms.
    expect(nextCaptureDelayMs({ ...base, framesBefore: 0, framesAfter: 400, elapsedMs: 10 })).toBe(
      10,
    );
  });

  it('counts a restart in between as growth from nothing', () => {
    // 1000 frames before, 300 after: the WAL restarted and 300 frames landed
    // in 20 ms, so 400 more take about 27 ms.
    const delay = nextCaptureDelayMs({
      ...base,
      framesBefore: 1000,
      framesAfter: 300,
      elapsedMs: 20,
    });
    expect(delay).toBeCloseTo((400 * 20) / 300, 6);
  });

  it('stays within the shortest delay and the interval', () => {
    expect(
      nextCaptureDelayMs({ ...base, framesBefore: 0, framesAfter: 100_000, elapsedMs: 10 }),
    ).toBe(2);
    expect(nextCaptureDelayMs({ ...base, framesBefore: 0, framesAfter: 1, elapsedMs: 100 })).toBe(
      100,
    );
  });
});

describe('captureTickTargetFrames', () => {
  it('is half the restart threshold, at most CAPTURE_TICK_MAX_FRAMES', () => {
    expect(CAPTURE_TICK_MAX_FRAMES).toBe(500);
    expect(captureTickTargetFrames(10_000)).toBe(500);
    expect(captureTickTargetFrames(800)).toBe(400);
  });
});

describe('SqliteSource capture timer', () => {
  it('captures every 50 ms when no interval is given', async () => {
    expect(DEFAULT_CAPTURE_INTERVAL_MS).toBe(50);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { path, application } = openApplicationDatabase('backupd-sqlite-schedule-', cleanups);
    const source = SqliteSource.open({ path });
    cleanups.push(() => void source.close());
    const before = source.tap.commits;
    application.exec('INSERT INTO t (body) VALUES (zeroblob(1))');
    vi.advanceTimersByTime(49);
    expect(source.tap.commits, 'no tick before 50 ms').toBe(before);
    vi.advanceTimersByTime(1);
    expect(source.tap.commits, 'the tick at 50 ms captured the commit').toBe(before + 1);
  });

  it('comes back once about CAPTURE_TICK_MAX_FRAMES more frames will have landed, below half the default restart threshold', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const { path, application } = openApplicationDatabase('backupd-sqlite-schedule-', cleanups);
    const source = SqliteSource.open({ path });
    cleanups.push(() => void source.close());
    // About 2000 frames (two 4 MB blobs of overflow pages) before the first
    // tick, at 50 ms: at that rate 500 more frames land in about 12.5 ms, so
    // the next tick comes then (by half the threshold, 5000 frames, it would
    // come only at the 50 ms interval).
    application.exec('INSERT INTO t (body) VALUES (zeroblob(4000000))');
    application.exec('INSERT INTO t (body) VALUES (zeroblob(4000000))');
    vi.advanceTimersByTime(50);
    const framesAtFirstTick = source.tap.walFrames;
    expect(framesAtFirstTick).toBeGreaterThan(1900);
    const before = source.tap.commits;
    application.exec('INSERT INTO t (body) VALUES (zeroblob(1))');
    const expectedDelay = Math.max(2, (CAPTURE_TICK_MAX_FRAMES * 50) / framesAtFirstTick);
    vi.advanceTimersByTime(Math.floor(expectedDelay) - 1);
    expect(source.tap.commits, 'no tick before the delay').toBe(before);
    vi.advanceTimersByTime(2);
    expect(source.tap.commits, 'the tick after the delay captured the commit').toBe(before + 1);
  });
});
