/** The store URL forms and where credentials come from: the end of the main help and of replicate's. */
export const STORE_URL_HELP = `Store URLs:
  s3://bucket/prefix[?endpoint=URL&region=R&forcePathStyle=true]   S3, R2, MinIO, …
  az://container/prefix[?account=NAME&endpoint=URL]                Azure Blob Storage
  gs://bucket/prefix[?endpoint=URL&project=ID]                     Google Cloud Storage
  file:///absolute/dir                                             a local directory
Credentials come from the environment or the SDK's standard chain, never from the URL:
  S3: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_PROFILE / instance roles
  Azure: AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT + AZURE_STORAGE_KEY, or AZURE_STORAGE_SAS_TOKEN
  GCS: GOOGLE_APPLICATION_CREDENTIALS or the metadata server`;
