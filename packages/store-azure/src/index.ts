export {
  type AccountKeyAuth,
  AzureBlobStore,
  type AzureBlobStoreOptions,
  type ConnectionStringAuth,
  DEFAULT_BLOCK_SIZE,
  MAX_BLOCK_SIZE,
  MAX_BLOCKS,
  MIN_BLOCK_SIZE,
  type SasUrlAuth,
  type TokenCredentialAuth,
  WRITE_ID_METADATA,
} from './azure-blob-store.ts';
export { redactSecrets } from './errors.ts';
