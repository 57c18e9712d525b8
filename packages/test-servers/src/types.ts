/** What the harness hands to tests: one entry per running server. */

/** An S3-compatible server, reachable with path-style requests. */
export interface S3TestServer {
  readonly name: 'versitygw' | 'minio' | 's3rver';
  readonly version: string;
  /** `http://127.0.0.1:<port>` */
  readonly endpoint: string;
  readonly region: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  /** Created by the harness, empty at the start of the run. */
  readonly bucket: string;
  readonly forcePathStyle: true;
  /** False for s3rver, which ignores `If-None-Match` and `If-Match` on writes (its role in the suite). */
  readonly honoursConditionalWrites: boolean;
}

/** Azurite's blob service, in memory, with the well-known development account. */
export interface AzureTestServer {
  readonly name: 'azurite';
  readonly version: string;
  readonly connectionString: string;
  readonly accountName: string;
  readonly accountKey: string;
  /** `http://127.0.0.1:<port>/<accountName>` */
  readonly blobEndpoint: string;
  /** Created by the harness. */
  readonly container: string;
}

/** fake-gcs-server, memory backend, plain HTTP. */
export interface GcsTestServer {
  readonly name: 'fake-gcs-server';
  readonly version: string;
  /** `http://127.0.0.1:<port>` (pass as the client's `apiEndpoint`). */
  readonly apiEndpoint: string;
  readonly projectId: string;
  /** Created by the harness. */
  readonly bucket: string;
}

export interface MissingServer {
  readonly name: string;
  /** Why it is not running, ending with what to do (`pnpm servers:install`). */
  readonly reason: string;
}

export interface TestServers {
  readonly s3: S3TestServer[];
  readonly azure: AzureTestServer[];
  readonly gcs: GcsTestServer[];
  readonly missing: MissingServer[];
}
