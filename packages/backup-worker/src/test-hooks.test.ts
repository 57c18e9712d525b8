import { describe, expect, it } from 'vitest';
import { SimulatedCrashError, WorkerPanicError } from './errors.ts';
import { TestHooks } from './test-hooks.ts';

describe('TestHooks', () => {
  it('allows n writes after failAfterWrites(n), then fails every one', () => {
    const hooks = new TestHooks();
    hooks.beforeWrite(); // no budget set: unlimited
    hooks.failAfterWrites(2);
    hooks.beforeWrite();
    hooks.beforeWrite();
    expect(() => hooks.beforeWrite()).toThrow(SimulatedCrashError);
    expect(() => hooks.beforeWrite()).toThrow(SimulatedCrashError);
  });

  it('panics at the next step only', () => {
    const hooks = new TestHooks();
    hooks.beforeStep();
    hooks.panicOnNextStep();
    expect(() => hooks.beforeStep()).toThrow(WorkerPanicError);
    hooks.beforeStep();
  });

  it('counts LIST requests', () => {
    const hooks = new TestHooks();
    hooks.beforeList();
    hooks.beforeList();
    expect(hooks.listRequests()).toBe(2);
  });
});
