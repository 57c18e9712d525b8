export { type FaultClock, ManualClock, settle, systemFaultClock } from './clock.ts';
export {
  type FaultProxy,
  type FaultProxyOptions,
  startFaultProxy,
  type WriteLogEntry,
} from './fault-proxy.ts';
export {
  type FaultyStore,
  type FaultyStoreOptions,
  faultyStore,
  type StoreOperation,
} from './faulty-store.ts';
export { InjectedFaultError, injectedFaultKind } from './injected-fault.ts';
export {
  type AnsweredRequest,
  type CannedAnswer,
  type InterceptedRequest,
  type InterceptingProxy,
  InterceptingProxyError,
  type InterceptingProxyOptions,
  startInterceptingProxy,
} from './intercepting-proxy.ts';
export {
  FAULT_KINDS,
  type FaultCounts,
  type FaultEvent,
  type FaultKind,
  type FaultRule,
  type FaultSchedule,
  FaultScheduleError,
  validateSchedule,
} from './schedule.ts';
