export { redactSecrets } from './errors.ts';
export {
  type GcsCapabilityOptions,
  GcsStore,
  type GcsStoreOptions,
  WRITE_ID_METADATA,
} from './gcs-store.ts';
export { DEFAULT_CHUNK_SIZE, RESUMABLE_CHUNK_GRANULARITY } from './resumable-upload.ts';
