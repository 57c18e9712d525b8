export {
  DEFAULT_FOLLOW_POLL_MS,
  DEFAULT_LATEST_EVERY_POLLS,
  type FollowEvent,
  type FollowedState,
  type FollowLag,
  followSqlite,
  type SqliteFollower,
  type SqliteFollowOptions,
} from './follow.ts';
export { FollowError, type FollowErrorCode } from './follow-errors.ts';
export { type FollowedChain, type NextSegment, readNextSegment } from './next-segment.ts';
export {
  createTarget,
  type PublishHeader,
  type PublishOptions,
  type PublishResult,
  pageSizeOf,
  publishState,
} from './publish.ts';
