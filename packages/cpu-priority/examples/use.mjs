import { applyCpuPriority, DEFAULT_CPU_PRIORITY, isCpuPriority } from '@x/cpu-priority';

const setting = process.env.MY_CPU_PRIORITY ?? DEFAULT_CPU_PRIORITY;
if (!isCpuPriority(setting)) throw new Error(`not a CPU priority: ${setting}`);
// Start the processes that must keep their own priority first: lowering is one-way.
const outcome = applyCpuPriority(setting);
if (outcome.note) console.warn(`running at ${outcome.applied}: ${outcome.note}`);
console.log(`running at ${outcome.applied}`);
