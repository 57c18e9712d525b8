/**
 * TEMPORARY relative import (see the root README, "How dependencies are
 * checked"): the SQLite benchmarks lower their CPU priority exactly as
 * `backupd replicate` does, with backupd's own code, which no package exports
 * yet. Remove this file once a package exports these names (wanted:
 * `applyCpuPriority`, `CpuPriority`, `DEFAULT_CPU_PRIORITY`, `isCpuPriority`),
 * and import them by package name. `.dependency-cruiser.cjs` allows this one
 * file, and no other, to import from apps/backupd.
 */
export {
  applyCpuPriority,
  type CpuPriority,
  DEFAULT_CPU_PRIORITY,
  isCpuPriority,
} from '../../apps/backupd/src/cpu-priority.ts';
