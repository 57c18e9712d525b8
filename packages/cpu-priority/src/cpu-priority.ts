/**
 * The CPU priority of a background process (backupd's, first): it is
 * background work, and it yields the CPU to the application it serves.
 *
 * Why: an application committing back to back wakes from every commit's
 * fsync. When the kernel runs it on the CPU where one of backupd's captures
 * is in progress (a few milliseconds of reading and checksumming), an
 * application at the same priority waits for backupd's time slice to end,
 * and those commits take milliseconds instead of a fraction of one. On a
 * two-core machine that cost the overhead benchmark about 3 % of its
 * transactions (eight invocations: 94.3–99.6 % of the unattached rate,
 * median 97.0 %); with backupd at `idle`, the application's slow commits
 * were as rare as without backupd (see the SQLite README for the figures).
 *
 * - `idle` (backupd's default): Linux's SCHED_IDLE policy for every thread of
 *   this process. The application preempts it as soon as it wakes, and the
 *   kernel counts a CPU running only this process as free when it places a
 *   waking thread. Set with `chrt` (util-linux); where that is missing or
 *   refuses, or on another system, it falls back to `low` and says so.
 * - `low`: nice 19 for every thread. Portable; helps less (the woken
 *   application still waits for this process's slice to end, shorter as it is).
 * - `normal`: what the process was started with, unchanged.
 *
 * Limits: lowering is one-way (without privileges a process cannot raise its
 * priority again). On a machine whose CPUs are all busy with other work, an
 * `idle` process runs only in the gaps (for backupd: replication lag and the
 * WAL then grow until the load drops; the health endpoint reports the lag).
 * Choose `normal` where the process must keep pace under full load. Threads
 * started later inherit the setting; processes started before applying it
 * (the application of backupd's `--exec`) keep theirs.
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
