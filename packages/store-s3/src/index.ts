export { classifyS3Error, type S3Operation } from './errors.ts';
export {
  type ConflictRetryOptions,
  DEFAULT_PART_SIZE,
  MAX_PART_SIZE,
  MAX_PARTS,
  MIN_PART_SIZE,
  type S3CapabilityOptions,
  type S3Checksums,
  type S3StaticCredentials,
  S3Store,
  type S3StoreOptions,
  WRITE_ID_METADATA,
} from './s3-store.ts';
