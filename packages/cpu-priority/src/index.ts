export {
  applyCpuPriority,
  CPU_PRIORITIES,
  type CpuPriority,
  type CpuPriorityOutcome,
  DEFAULT_CPU_PRIORITY,
  isCpuPriority,
  LOW_NICE,
} from './cpu-priority.ts';
