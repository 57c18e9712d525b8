/**
 * Starts every installed test server on 127.0.0.1, in parallel, each on free
 * ports with its data in a fresh temporary directory, waits until each
 * answers, and creates one bucket (or container) per server.
 *
 * Guarantees: what `startTestServers` returns is running and ready; a server
 * that is absent or fails to start is listed in `missing` with the reason
 * (or, when `requireAll` is set and the server is required, the start fails).
 * `stop()` stops every child and removes the temporary directory. Server
 * output goes to log files in that directory, never to the console.
 *
 * Used by the vitest global setup and by `scripts/compat.ts`.
 */

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  forgetDirectory,
  freePort,
  type RunningProcess,
  removeOnExit,
  spawnServer,
  waitForHttp,
} from './processes.ts';
import { azureCreateContainer, s3SignedRequest } from './signing.ts';
import type {
  AzureTestServer,
  GcsTestServer,
  MissingServer,
  S3TestServer,
  TestServers,
} from './types.ts';

export const INSTALL_HINT = 'run `pnpm servers:install`';

const FAILED_TO_START = 'failed to start: ';

/** Servers whose absence fails the run under CI (MinIO is optional). */
export const REQUIRED_SERVERS = ['versitygw', 's3rver', 'azurite', 'fake-gcs-server'] as const;

const BUCKET = 'backupd-test';
const REGION = 'us-east-1';

// Azurite's documented development account (public, not a secret).
const AZURITE_ACCOUNT = 'devstoreaccount1';
const AZURITE_KEY =
  'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

const packageRoot = fileURLToPath(new URL('..', import.meta.url));
const repositoryRoot = join(packageRoot, '..', '..');
const require = createRequire(join(packageRoot, 'package.json'));

export interface StartOptions {
  /** Fail when a required server is missing or does not start (what CI wants). Default: `process.env.CI === 'true'`. */
  readonly requireAll?: boolean;
  /** Where the Go-built servers are. Default: `<repo>/.servers/bin`. */
  readonly binDirectory?: string;
  /** Start only these (by name); default all. */
  readonly only?: readonly string[];
}

export interface StartedTestServers {
  readonly servers: TestServers;
  /** The temporary directory holding data and logs (removed by `stop`). */
  readonly workDirectory: string;
  stop(): Promise<void>;
}

type Started =
  | { kind: 's3'; server: S3TestServer }
  | { kind: 'azure'; server: AzureTestServer }
  | { kind: 'gcs'; server: GcsTestServer };

interface ServerDefinition {
  readonly name: string;
  /** Why it cannot run here, or undefined when it can. */
  unavailable(): string | undefined;
  start(context: StartContext): Promise<Started>;
}

interface StartContext {
  readonly directory: string;
  readonly processes: RunningProcess[];
}

function goBinaryVersion(binDirectory: string, name: string): string {
  const stamp = join(binDirectory, `.${name}.version`);
  if (existsSync(stamp)) return readFileSync(stamp, 'utf8').trim();
  try {
    const output = execFileSync(join(binDirectory, name), ['--version'], {
      encoding: 'utf8',
      timeout: 10_000,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return output.split('\n')[0]?.trim() || 'unknown';
  } catch {
    return 'unknown';
  }
}

function npmPackageVersion(name: string): string {
  const manifest = JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8')) as {
    version: string;
  };
  return manifest.version;
}

function npmPackageFile(name: string, relative: string): string {
  return join(dirname(require.resolve(`${name}/package.json`)), relative);
}

function npmAvailable(name: string): string | undefined {
  try {
    require.resolve(`${name}/package.json`);
    return undefined;
  } catch {
    return `npm package ${name} is not installed (run \`pnpm install\`)`;
  }
}

function randomSecret(): string {
  return randomBytes(18).toString('base64url');
}

function definitions(binDirectory: string): ServerDefinition[] {
  const goBinary = (name: string) => join(binDirectory, name);
  const goUnavailable = (name: string) => () =>
    existsSync(goBinary(name)) ? undefined : `${goBinary(name)} not found; ${INSTALL_HINT}`;

  return [
    {
      name: 'versitygw',
      unavailable: goUnavailable('versitygw'),
      async start(context) {
        const port = await freePort();
        const root = join(context.directory, 'versitygw');
        await mkdir(root);
        const accessKeyId = `vgw${randomBytes(6).toString('hex')}`;
        const secretAccessKey = randomSecret();
        const process = spawnServer(
          'versitygw',
          goBinary('versitygw'),
          ['--port', `127.0.0.1:${port}`, '--region', REGION, '--quiet', 'posix', root],
          {
            logFile: join(context.directory, 'versitygw.log'),
            // Credentials through the environment, so they do not show in `ps`.
            env: { ROOT_ACCESS_KEY_ID: accessKeyId, ROOT_SECRET_ACCESS_KEY: secretAccessKey },
          },
        );
        context.processes.push(process);
        const endpoint = `http://127.0.0.1:${port}`;
        await waitForHttp(process, `${endpoint}/`);
        const server: S3TestServer = {
          name: 'versitygw',
          version: goBinaryVersion(binDirectory, 'versitygw'),
          endpoint,
          region: REGION,
          accessKeyId,
          secretAccessKey,
          bucket: BUCKET,
          forcePathStyle: true,
          honoursConditionalWrites: true,
        };
        await createS3Bucket(server);
        return { kind: 's3', server };
      },
    },
    {
      name: 'minio',
      unavailable: goUnavailable('minio'),
      async start(context) {
        const [port, consolePort] = [await freePort(), await freePort()];
        const data = join(context.directory, 'minio');
        await mkdir(data);
        const accessKeyId = `minio${randomBytes(6).toString('hex')}`;
        const secretAccessKey = randomSecret();
        const process = spawnServer(
          'minio',
          goBinary('minio'),
          [
            'server',
            data,
            '--address',
            `127.0.0.1:${port}`,
            '--console-address',
            `127.0.0.1:${consolePort}`,
            '--quiet',
          ],
          {
            logFile: join(context.directory, 'minio.log'),
            env: {
              MINIO_ROOT_USER: accessKeyId,
              MINIO_ROOT_PASSWORD: secretAccessKey,
              MINIO_BROWSER: 'off',
              MINIO_UPDATE: 'off',
              HOME: context.directory,
            },
          },
        );
        context.processes.push(process);
        const endpoint = `http://127.0.0.1:${port}`;
        await waitForHttp(process, `${endpoint}/minio/health/ready`, {
          accept: (status) => status === 200,
        });
        const server: S3TestServer = {
          name: 'minio',
          version: goBinaryVersion(binDirectory, 'minio'),
          endpoint,
          region: REGION,
          accessKeyId,
          secretAccessKey,
          bucket: BUCKET,
          forcePathStyle: true,
          honoursConditionalWrites: true,
        };
        await createS3Bucket(server);
        return { kind: 's3', server };
      },
    },
    {
      name: 's3rver',
      unavailable: () => npmAvailable('s3rver'),
      async start(context) {
        const port = await freePort();
        const data = join(context.directory, 's3rver');
        await mkdir(data);
        const process = spawnServer(
          's3rver',
          globalThis.process.execPath,
          [
            // s3rver makes its list continuation tokens with DES, which OpenSSL 3 only has in its legacy provider.
            '--openssl-legacy-provider',
            npmPackageFile('s3rver', 'bin/s3rver.js'),
            '--directory',
            data,
            '--address',
            '127.0.0.1',
            '--port',
            String(port),
            '--silent',
            '--no-vhost-buckets',
            '--configure-bucket',
            BUCKET,
          ],
          { logFile: join(context.directory, 's3rver.log') },
        );
        context.processes.push(process);
        const endpoint = `http://127.0.0.1:${port}`;
        await waitForHttp(process, `${endpoint}/`);
        return {
          kind: 's3',
          server: {
            name: 's3rver',
            version: npmPackageVersion('s3rver'),
            endpoint,
            region: REGION,
            // s3rver accepts only its fixed development credentials.
            accessKeyId: 'S3RVER',
            secretAccessKey: 'S3RVER',
            bucket: BUCKET,
            forcePathStyle: true,
            honoursConditionalWrites: false,
          },
        };
      },
    },
    {
      name: 'azurite',
      unavailable: () => npmAvailable('azurite'),
      async start(context) {
        const port = await freePort();
        const location = join(context.directory, 'azurite');
        await mkdir(location);
        const process = spawnServer(
          'azurite',
          globalThis.process.execPath,
          [
            npmPackageFile('azurite', 'dist/src/blob/main.js'),
            '--blobHost',
            '127.0.0.1',
            '--blobPort',
            String(port),
            '--inMemoryPersistence',
            '--loose',
            '--skipApiVersionCheck',
            '--disableTelemetry',
            '--silent',
          ],
          { logFile: join(context.directory, 'azurite.log'), cwd: location },
        );
        context.processes.push(process);
        const blobEndpoint = `http://127.0.0.1:${port}/${AZURITE_ACCOUNT}`;
        await waitForHttp(process, `${blobEndpoint}?comp=list`);
        const container = BUCKET;
        const response = await azureCreateContainer({
          blobEndpoint,
          accountName: AZURITE_ACCOUNT,
          accountKey: AZURITE_KEY,
          container,
        });
        if (response.status !== 201 && response.status !== 409) {
          throw new Error(
            `azurite: creating container ${container} answered ${response.status}: ${await response.text()}`,
          );
        }
        return {
          kind: 'azure',
          server: {
            name: 'azurite',
            version: npmPackageVersion('azurite'),
            connectionString: `DefaultEndpointsProtocol=http;AccountName=${AZURITE_ACCOUNT};AccountKey=${AZURITE_KEY};BlobEndpoint=${blobEndpoint};`,
            accountName: AZURITE_ACCOUNT,
            accountKey: AZURITE_KEY,
            blobEndpoint,
            container,
          },
        };
      },
    },
    {
      name: 'fake-gcs-server',
      unavailable: goUnavailable('fake-gcs-server'),
      async start(context) {
        const port = await freePort();
        const apiEndpoint = `http://127.0.0.1:${port}`;
        const process = spawnServer(
          'fake-gcs-server',
          goBinary('fake-gcs-server'),
          [
            '-backend',
            'memory',
            '-scheme',
            'http',
            '-host',
            '127.0.0.1',
            '-port',
            String(port),
            '-public-host',
            `127.0.0.1:${port}`,
            '-external-url',
            apiEndpoint,
            '-log-level',
            'warn',
          ],
          { logFile: join(context.directory, 'fake-gcs-server.log') },
        );
        context.processes.push(process);
        await waitForHttp(process, `${apiEndpoint}/storage/v1/b`, {
          accept: (status) => status === 200,
        });
        const projectId = 'backupd-test';
        const response = await fetch(`${apiEndpoint}/storage/v1/b?project=${projectId}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ name: BUCKET }),
          signal: AbortSignal.timeout(10_000),
        });
        if (response.status !== 200 && response.status !== 409) {
          throw new Error(
            `fake-gcs-server: creating bucket answered ${response.status}: ${await response.text()}`,
          );
        }
        return {
          kind: 'gcs',
          server: {
            name: 'fake-gcs-server',
            version: goBinaryVersion(binDirectory, 'fake-gcs-server'),
            apiEndpoint,
            projectId,
            bucket: BUCKET,
          },
        };
      },
    },
  ];
}

/**
 * Creates the server's bucket. A server can report ready a moment before it
 * accepts writes (MinIO answers 503 while it initialises), so 5xx answers are
 * retried for a while.
 */
async function createS3Bucket(server: S3TestServer): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const response = await s3SignedRequest({
      method: 'PUT',
      endpoint: server.endpoint,
      path: `/${server.bucket}`,
      region: server.region,
      accessKeyId: server.accessKeyId,
      secretAccessKey: server.secretAccessKey,
    });
    const text = await response.text();
    if (response.status === 200 || /BucketAlreadyOwnedByYou/.test(text)) return;
    if (response.status < 500 || Date.now() > deadline) {
      throw new Error(
        `${server.name}: creating bucket ${server.bucket} answered ${response.status}: ${text.slice(0, 500)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Starts the servers; see the module comment for what is guaranteed. */
export async function startTestServers(options: StartOptions = {}): Promise<StartedTestServers> {
  const requireAll = options.requireAll ?? process.env.CI === 'true';
  const binDirectory = options.binDirectory ?? join(repositoryRoot, '.servers', 'bin');
  const directory = await mkdtemp(join(tmpdir(), 'backupd-test-servers-'));
  removeOnExit(directory);
  const processes: RunningProcess[] = [];
  const context: StartContext = { directory, processes };
  const selected = definitions(binDirectory).filter(
    (definition) => !options.only || options.only.includes(definition.name),
  );

  const missing: MissingServer[] = [];
  const results = await Promise.all(
    selected.map(async (definition): Promise<Started | undefined> => {
      const reason = definition.unavailable();
      if (reason !== undefined) {
        missing.push({ name: definition.name, reason });
        return undefined;
      }
      try {
        return await definition.start(context);
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        missing.push({ name: definition.name, reason: `${FAILED_TO_START}${message}` });
        return undefined;
      }
    }),
  );

  const stop = async () => {
    await Promise.all(processes.map((running) => running.stop()));
    await rm(directory, { recursive: true, force: true });
    forgetDirectory(directory);
  };

  // Required servers must run; an optional one (MinIO) may be absent, but
  // one that is installed and fails to start is a failure too.
  const mustRun = missing.filter(
    (entry) =>
      (REQUIRED_SERVERS as readonly string[]).includes(entry.name) ||
      entry.reason.startsWith(FAILED_TO_START),
  );
  if (requireAll && mustRun.length > 0) {
    await stop();
    throw new Error(
      `test servers missing or not starting under CI=true (${INSTALL_HINT}):\n${mustRun
        .map((entry) => `  ${entry.name}: ${entry.reason}`)
        .join('\n')}`,
    );
  }

  missing.sort((a, b) => a.name.localeCompare(b.name));
  const servers: TestServers = { s3: [], azure: [], gcs: [], missing };
  for (const result of results) {
    if (!result) continue;
    if (result.kind === 's3') servers.s3.push(result.server);
    else if (result.kind === 'azure') servers.azure.push(result.server);
    else servers.gcs.push(result.server);
  }
  return { servers, workDirectory: directory, stop };
}
