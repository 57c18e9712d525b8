/**
 * Credentials never reach anything backupd prints or serves. Canary values go
 * into the environment (the real S3 secret for the run that needs one, Azure
 * keys and connection strings, a config file's `${VAR}`), every command's
 * standard output and error, /metrics, /healthz and the status page are
 * collected — on success and on error paths (a wrong secret, refused
 * credentials in a URL) — and none may contain a canary.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomPrefix, testServers } from '@x/test-servers';
import { describe, expect, test } from 'vitest';
import {
  baseEnv,
  createWalDatabase,
  getText,
  listeningUrl,
  type RunningProcess,
  runCli,
  s3Env,
  s3Url,
  startBackupd,
  suiteWorkspace,
  transcript,
  waitFor,
} from './helpers/cli.ts';
import { directStore, missingReason, s3Server } from './helpers/servers.ts';

const versitygw = s3Server('versitygw');
if (!versitygw) console.warn(`backupd canaries: skipped, ${missingReason('versitygw')}`);

function canary(label: string): string {
  return `canary${label}${randomBytes(12).toString('hex')}`;
}

/** A canary that is also valid base64 (the Azure SDK decodes account keys). */
function base64Canary(label: string): string {
  return Buffer.from(canary(label)).toString('base64');
}

describe.skipIf(!versitygw)('canary credentials', () => {
  const { directory, running } = suiteWorkspace('canary');
  /** Everything served over HTTP in this file. */
  const served: string[] = [];
  const canaries = {
    wrongSecret: canary('WrongSecret'),
    azureKey: base64Canary('AzureKey'),
    azureConnectionKey: base64Canary('AzureConnection'),
    endpointPassword: canary('EndpointPassword'),
    schemePassword: canary('SchemePassword'),
  };

  const azureCanaries = () => ({
    AZURE_STORAGE_KEY: canaries.azureKey,
    AZURE_STORAGE_CONNECTION_STRING: `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${canaries.azureConnectionKey};BlobEndpoint=${testServers().azure[0]?.blobEndpoint ?? 'http://127.0.0.1:9/devstoreaccount1'};`,
  });

  /** Asserts no canary (and not the real secret) is in `text`; names where it leaked. */
  function expectClean(text: string, where: string): void {
    const secrets: Record<string, string> = { ...canaries, realSecret: versitygw!.secretAccessKey };
    for (const [name, value] of Object.entries(secrets)) {
      if (text.includes(value)) throw new Error(`${name} leaked in ${where}:\n${text}`);
    }
  }

  async function scrapeListener(process: RunningProcess): Promise<void> {
    const base = await listeningUrl(process);
    for (const path of ['/metrics', '/healthz', '/']) {
      const { body } = await getText(`${base}${path}`);
      served.push(body);
      expectClean(body, `${process.label} ${path}`);
    }
  }

  test('replicate, ls, verify, lease and restore with the real secret and Azure canaries in the environment', async () => {
    const server = versitygw!;
    const prefix = randomPrefix('backupd-canary');
    const url = s3Url(server, prefix);
    const env = s3Env(server, {
      ...azureCanaries(),
      BACKUPD_INTERVAL: '200ms',
      BACKUPD_LEASE_TTL: '3s',
    });
    const databasePath = join(directory, 'good.db');
    await createWalDatabase(databasePath);
    const replicate = startBackupd(['replicate', databasePath, url, '--listen', '127.0.0.1:0'], {
      env,
      label: 'replicate (real secret)',
    });
    running.push(replicate);
    const store = directStore(server);
    await waitFor(
      'a first restore point',
      async () => (await store.head(`${prefix}/LATEST`)) !== null,
      {
        describe: () => replicate.describe(),
      },
    );
    await scrapeListener(replicate);
    expect(await replicate.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    for (const args of [
      ['ls', url],
      ['verify', url, '--deep'],
      ['lease', url],
      ['restore', url, join(directory, 'restored', 'good.db')],
    ]) {
      const result = await runCli(args, { env });
      expect(result.code, `${args[0]}: ${result.stderr}`).toBe(0);
    }
    // The Azure canaries on an error path: Azurite refuses a wrong key.
    if (testServers().azure[0]) {
      const azure = testServers().azure[0]!;
      const byConnectionString = await runCli(
        ['ls', `az://${azure.container}/${randomPrefix('canary')}`],
        { env },
      );
      expect(byConnectionString.code).toBe(1);
      const byKey = await runCli(
        [
          'ls',
          `az://${azure.container}/${randomPrefix('canary')}?account=${azure.accountName}&endpoint=${encodeURIComponent(azure.blobEndpoint)}`,
        ],
        { env: { ...env, AZURE_STORAGE_CONNECTION_STRING: undefined } },
      );
      expect(byKey.code).toBe(1);
    } else {
      console.warn(`backupd canaries: Azure error path skipped, ${missingReason('azurite')}`);
    }
  });

  test('a wrong secret: access-denied errors are logged and served, the secret is not', async () => {
    const server = versitygw!;
    const url = s3Url(server, randomPrefix('backupd-canary'));
    const env = s3Env(server, {
      ...azureCanaries(),
      AWS_SECRET_ACCESS_KEY: canaries.wrongSecret,
      BACKUPD_INTERVAL: '200ms',
      BACKUPD_LEASE_TTL: '3s',
    });
    const listed = await runCli(['ls', url], { env });
    expect(listed.code).toBe(1);
    expect(listed.stderr).toMatch(/backupd ls: .+/);
    const databasePath = join(directory, 'wrong.db');
    await createWalDatabase(databasePath);
    const replicate = startBackupd(['replicate', databasePath, url, '--listen', '127.0.0.1:0'], {
      env,
      label: 'replicate (wrong secret)',
    });
    running.push(replicate);
    const base = await listeningUrl(replicate);
    // Unhealthy after three failed attempts (backing off 1 s, 2 s): the
    // reason and the logged errors carry the service's refusal.
    const health = await waitFor(
      'the access failures to make it unhealthy',
      async () => {
        const response = await getText(`${base}/healthz`);
        return response.status === 503 ? response : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 250, describe: () => replicate.describe() },
    );
    expect(health.body).toMatch(/consecutive failed backup steps/);
    const warnings = replicate.logEvents().filter((line) => Number(line.level) >= 40);
    expect(warnings.length).toBeGreaterThanOrEqual(3);
    await scrapeListener(replicate);
    expect((await replicate.stop('SIGTERM')).signal).toBeNull();
  });

  // biome-ignore lint/suspicious/noTemplateCurlyInString: the config file's ${VAR} syntax, literally
  test('a ${VAR} that puts a credential into an endpoint URL is refused without printing it', async () => {
    const server = versitygw!;
    const configPath = join(directory, 'backupd.yaml');
    const endpoint = new URL(server.endpoint);
    writeFileSync(
      configPath,
      [
        'databases:',
        `  - path: ${join(directory, 'a.db')}`,
        `    url: s3://${server.bucket}/a?endpoint=http://operator:\${ENDPOINT_PASS}@${endpoint.host}`,
        `  - path: ${join(directory, 'b.db')}`,
        `    url: s3://${server.bucket}/b?endpoint=ftp://operator:\${SCHEME_PASS}@${endpoint.host}`,
        `  - path: ${join(directory, 'd.db')}`,
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the config file's ${VAR} syntax, literally
        '    url: s3://bucket/d?endpoint=${SCHEME_PASS}',
        `  - path: ${join(directory, 'c.db')}`,
        `    url: s3://operator:\${ENDPOINT_PASS}@${server.bucket}/c`,
        '',
      ].join('\n'),
    );
    // Names that do not look like secrets, so only the refusal itself can keep them out.
    const env = s3Env(server, {
      ...azureCanaries(),
      ENDPOINT_PASS: canaries.endpointPassword,
      SCHEME_PASS: canaries.schemePassword,
    });
    const result = await runCli(['replicate', '-c', configPath], { env });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'databases[0].url: credentials in an endpoint are not accepted',
    );
    expect(result.stderr).toContain(
      'databases[1].url: credentials in an endpoint are not accepted',
    );
    expect(result.stderr).toContain(
      'databases[2].url: endpoint must be an http(s) URL such as https://s3.example.com, got text that is not a URL',
    );
    expect(result.stderr).toContain(
      'databases[3].url: credentials in a store URL are not accepted',
    );
  });

  test('meta: a value a command does print is found by the grep (the capture is verbatim)', async () => {
    // Not a credential: a duration setting's bad value is echoed in its
    // message, which is what this needs. Kept out of the canary list above.
    const echoed = canary('Echoed');
    const configPath = join(directory, 'echo.yaml');
    writeFileSync(
      configPath,
      `databases:\n  - path: e.db\n    url: file:///var/backups/e\n    interval: \${PLAIN_SETTING}\n`,
    );
    const result = await runCli(['replicate', '-c', configPath], {
      env: baseEnv({ PLAIN_SETTING: echoed }),
    });
    expect(result.code).toBe(2);
    expect(transcript.some((output) => output.includes(echoed))).toBe(true);
  });

  // Last in the file: every command's output and everything served above.
  test('no canary in any output of any command run in this file', () => {
    expect(transcript.length).toBeGreaterThan(10);
    expect(served.length).toBeGreaterThanOrEqual(6);
    for (const [index, output] of transcript.entries())
      expectClean(output, `command output #${index}`);
    // The error paths really ran: the transcript holds their messages.
    expect(transcript.join('\n')).toMatch(/credentials in an endpoint are not accepted/);
  });
});
