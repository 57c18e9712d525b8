/**
 * The CPU priority of a background process (backupd's, first), so that it
 * yields the CPU to the application it serves: an application woken from a
 * commit's fsync on a CPU where this process is mid-slice otherwise waits for
 * the slice to end. Why `idle` by default, with figures:
 * docs/decisions/2026-12-06-cpu-priority-idle.md.
 * - `idle`: SCHED_IDLE for every thread, set with `chrt`; `low` where that fails.
 * - `low`: nice 19 for every thread. `normal`: left as started.
 * Lowering is one-way; later threads inherit it, processes started before
 * keep theirs. Under full load an `idle` process runs only in the gaps.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { setPriority } from 'node:os';

export const CPU_PRIORITIES = ['idle', 'low', 'normal'] as const;
export type CpuPriority = (typeof CPU_PRIORITIES)[number];
export const DEFAULT_CPU_PRIORITY: CpuPriority = 'idle';

/** The nice value of `low` (and of `idle` where SCHED_IDLE cannot be set). */
export const LOW_NICE = 19;
/** Linux's number for the SCHED_IDLE policy (`sched.h`), as `/proc` shows it. */
const SCHED_IDLE = 5;

export function isCpuPriority(value: unknown): value is CpuPriority {
  return typeof value === 'string' && (CPU_PRIORITIES as readonly string[]).includes(value);
}

export interface CpuPriorityOutcome {
  /** What this process now runs at. */
  readonly applied: CpuPriority;
  /** Why `applied` is not what was asked for; absent when it is. */
  readonly note?: string;
}

/** The ids of this process's threads (Linux), or `[0]` (the process) elsewhere. */
function threadIds(): number[] {
  try {
    return readdirSync('/proc/self/task').map(Number);
  } catch {
    return [0];
  }
}

/**
 * The scheduling policy of each thread of this process, from
 * `/proc/self/task/<id>/stat` (field 41); `null` where `/proc` cannot say.
 */
export function threadPolicies(): number[] | null {
  try {
    return readdirSync('/proc/self/task').map((id) => {
      const stat = readFileSync(`/proc/self/task/${id}/stat`, 'utf8');
      // Fields after the command name, which is in parentheses and may hold spaces.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return Number(fields[41 - 3]);
    });
  } catch {
    return null;
  }
}

/**
 * Lowers this process's CPU priority to `priority` (see the module comment).
 * Never throws: what could not be done is in the outcome's `note`.
 * @param options.chrt the `chrt` program to run (default: `chrt` on the PATH).
 */
export function applyCpuPriority(
  priority: CpuPriority,
  options: { readonly chrt?: string } = {},
): CpuPriorityOutcome {
  if (priority === 'normal') return { applied: 'normal' };
  // Nice first, for every thread: it is what remains if SCHED_IDLE fails.
  // (On Linux the nice value belongs to a thread, not to the process.)
  try {
    for (const id of threadIds()) {
      try {
        setPriority(id, LOW_NICE);
      } catch (error) {
        // A thread that ended since it was listed has nothing to lower.
        // (Node reports it as ERR_SYSTEM_ERROR with the errno in `info`.)
        if ((error as { info?: { code?: string } }).info?.code !== 'ESRCH') throw error;
      }
    }
  } catch (error) {
    return {
      applied: 'normal',
      note: `could not lower the priority: ${(error as Error).message}`,
    };
  }
  if (priority === 'low') return { applied: 'low' };
  if (process.platform !== 'linux')
    return { applied: 'low', note: `SCHED_IDLE is Linux's; running at nice ${LOW_NICE}` };
  const chrt = options.chrt ?? 'chrt';
  const result = spawnSync(chrt, ['--idle', '--all-tasks', '--pid', '0', String(process.pid)], {
    stdio: ['ignore', 'ignore', 'pipe'],
    encoding: 'utf8',
    timeout: 10_000,
  });
  const failure =
    result.error !== undefined
      ? ((result.error as NodeJS.ErrnoException).code ?? result.error.message)
      : result.status !== 0
        ? `exit ${result.status ?? result.signal}: ${result.stderr.trim()}`
        : null;
  if (failure !== null)
    return {
      applied: 'low',
      note: `${chrt} could not set SCHED_IDLE (${failure}); running at nice ${LOW_NICE}`,
    };
  const policies = threadPolicies();
  if (policies?.some((policy) => policy !== SCHED_IDLE))
    return {
      applied: 'low',
      note: `${chrt} left threads outside SCHED_IDLE; running at nice ${LOW_NICE}`,
    };
  return { applied: 'idle' };
}
