/**
 * Opens the store a URL names. An adapter package is imported only when its
 * scheme is used, so `file://` loads no cloud SDK. Credentials never come from
 * the URL: s3 takes the AWS SDK's standard chain, az a connection string or an
 * account with a key or SAS token, gs Google's application-default credentials
 * (unauthenticated with `?endpoint=` and none: emulators). Azure's `?endpoint=`
 * overrides the blob endpoint (Azurite, sovereign clouds). The variables, the
 * region and checksum defaults: the README's "Store URLs" and SECURITY.md.
 */
import { isAbsolute } from 'node:path';
import { FsStore, MemoryStore, type ObjectStore } from '@x/store';
import { FileUrlNotAbsoluteError, type StoreLocation, StoreUrlError } from './store-url.ts';

export interface OpenedStore {
  /** The store at the bucket's (or directory's) root. */
  readonly store: ObjectStore;
  /** The backup prefix inside it. */
  readonly prefix: string;
}

type Env = Readonly<Record<string, string | undefined>>;

const memoryStores = new Map<string, MemoryStore>();

export async function openStore(location: StoreLocation, env: Env): Promise<OpenedStore> {
  switch (location.scheme) {
    case 'memory': {
      let store = memoryStores.get(location.name);
      if (!store) {
        store = new MemoryStore(location.name);
        memoryStores.set(location.name, store);
      }
      return { store, prefix: location.prefix };
    }
    case 'file':
      // parseStoreUrl gives only absolute roots; a location built some other
      // way must not reach FsStore relative, where it would follow the
      // process's working directory.
      if (!isAbsolute(location.root))
        throw new FileUrlNotAbsoluteError(location.root, 'is not an absolute directory');
      return { store: new FsStore({ root: location.root }), prefix: location.prefix };
    case 's3': {
      const { S3Store } = await import('@x/store-s3');
      const region =
        location.region ??
        env.AWS_REGION ??
        env.AWS_DEFAULT_REGION ??
        (location.endpoint ? 'us-east-1' : undefined);
      return {
        store: new S3Store({
          bucket: location.bucket,
          ...(region ? { region } : {}),
          ...(location.endpoint ? { endpoint: location.endpoint } : {}),
          ...(location.forcePathStyle !== undefined
            ? { forcePathStyle: location.forcePathStyle }
            : {}),
          // Unset: the adapter's default (when-required with an endpoint).
          ...(location.checksums !== undefined ? { checksums: location.checksums } : {}),
        }),
        prefix: location.prefix,
      };
    }
    case 'az': {
      const { AzureBlobStore } = await import('@x/store-azure');
      const account = location.account ?? env.AZURE_STORAGE_ACCOUNT;
      const endpoint =
        location.endpoint ?? (account ? `https://${account}.blob.core.windows.net` : undefined);
      if (env.AZURE_STORAGE_CONNECTION_STRING) {
        return {
          store: new AzureBlobStore({
            container: location.container,
            connectionString: env.AZURE_STORAGE_CONNECTION_STRING,
          }),
          prefix: location.prefix,
        };
      }
      if (account && env.AZURE_STORAGE_KEY) {
        return {
          store: new AzureBlobStore({
            container: location.container,
            accountName: account,
            accountKey: env.AZURE_STORAGE_KEY,
            ...(endpoint ? { blobEndpoint: endpoint } : {}),
          }),
          prefix: location.prefix,
        };
      }
      if (endpoint && env.AZURE_STORAGE_SAS_TOKEN) {
        const token = env.AZURE_STORAGE_SAS_TOKEN.replace(/^\?/, '');
        return {
          store: new AzureBlobStore({
            container: location.container,
            sasUrl: `${endpoint}?${token}`,
          }),
          prefix: location.prefix,
        };
      }
      throw new StoreUrlError(
        'no Azure credentials: set AZURE_STORAGE_CONNECTION_STRING, or an account (?account= or AZURE_STORAGE_ACCOUNT) with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN',
      );
    }
    case 'gs': {
      const { GcsStore } = await import('@x/store-gcs');
      const projectId = location.project ?? env.GOOGLE_CLOUD_PROJECT ?? env.GCLOUD_PROJECT;
      return {
        store: new GcsStore({
          bucket: location.bucket,
          ...(projectId ? { projectId } : {}),
          ...(location.endpoint ? { apiEndpoint: location.endpoint } : {}),
        }),
        prefix: location.prefix,
      };
    }
  }
}
