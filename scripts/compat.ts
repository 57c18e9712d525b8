/**
 * `pnpm compat`: measures which storage servers honour the store interface's
 * conditional writes, and writes docs/compatibility.md.
 *
 * It starts every installed test server (the same harness the tests use),
 * runs every case of @x/store-conformance and `probeConditionalWrites`
 * against each server with the matching adapter — with every conditional
 * capability claimed, so each conditional case meets the server's real
 * behaviour — and writes one row per server and version. A failure is
 * reported as measured; nothing is hidden. Then it runs the suite once more
 * with the capabilities the probe says to declare, as a user would configure
 * the adapter (and as the tests do), and reports that result too.
 * `distinctVersions` is not claimed: it is the adapter's disclosure (S3:
 * false, content-hash ETags), so the same-bytes cases are not applicable on
 * S3. Adapters not present in the tree yet are skipped with a note. Run with
 * `node --conditions=@x/source scripts/compat.ts`.
 */
import { writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ObjectStore, StoreCapabilities } from '@x/store';
import {
  CASE_GROUPS,
  type CaseGroup,
  type CaseResult,
  conformanceCases,
  type ProbeReport,
  probeConditionalWrites,
  runConformanceCases,
  type Verdict,
} from '@x/store-conformance';
import { S3Store } from '@x/store-s3';
import { startTestServers } from '@x/test-servers/harness';

const repositoryRoot = join(dirname(fileURLToPath(import.meta.url)), '..');
const outputFile = join(repositoryRoot, 'docs', 'compatibility.md');

/** The capabilities a service may or may not honour (`distinctVersions` is the adapter's, not claimed). */
type Conditional = Pick<
  StoreCapabilities,
  'conditionalPut' | 'conditionalDelete' | 'multipartCreate'
>;

const CLAIM_ALL: Conditional = {
  conditionalPut: true,
  conditionalDelete: true,
  multipartCreate: true,
};

interface Target {
  readonly server: string;
  readonly version: string;
  readonly adapter: string;
  /** `capabilities`: what to configure the adapter with; undefined when it cannot be configured. */
  createStore(capabilities: Conditional): ObjectStore | undefined;
}

interface Measured {
  readonly target: Target;
  readonly results: CaseResult[];
  readonly probe: ProbeReport | undefined;
  /** The suite again, with the capabilities the probe recommends (undefined: not possible). */
  readonly declared: { capabilities: Conditional; results: CaseResult[] } | undefined;
  readonly declaredNote: string | undefined;
  readonly distinctVersions: boolean | undefined;
  readonly error: string | undefined;
  readonly durationMs: number;
}

function runId(): string {
  return `compat-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Loads an adapter package (a workspace dependency of this one), or says why not. */
async function loadAdapter(
  specifier: string,
  exportName: string,
): Promise<{ value: unknown } | { missing: string }> {
  try {
    const module = (await import(specifier)) as Record<string, unknown>;
    if (typeof module[exportName] !== 'function') {
      return { missing: `${specifier} has no export ${exportName} yet` };
    }
    return { value: module[exportName] };
  } catch (error) {
    return {
      missing: `${specifier} could not be loaded (${error instanceof Error ? error.message.split('\n')[0] : String(error)})`,
    };
  }
}

/** What the probe says to declare. */
function recommended(probe: ProbeReport): Conditional {
  return {
    conditionalPut: probe.create.outcome === 'honoured' && probe.replace.outcome === 'honoured',
    conditionalDelete: probe.delete.outcome === 'honoured',
    multipartCreate: probe.multipartCreate?.outcome === 'honoured',
  };
}

async function measure(target: Target): Promise<Measured> {
  const started = performance.now();
  try {
    const store = target.createStore(CLAIM_ALL)!;
    const results = await runConformanceCases(store, { prefix: runId(), capabilities: CLAIM_ALL });
    const probe = await probeConditionalWrites(store, runId());
    const capabilities = recommended(probe);
    const configured = target.createStore(capabilities);
    const declared = configured
      ? {
          capabilities,
          results: await runConformanceCases(configured, { prefix: runId(), capabilities }),
        }
      : undefined;
    return {
      target,
      results,
      probe,
      declared,
      declaredNote: configured
        ? undefined
        : `${target.adapter} has no capabilities option to declare ${JSON.stringify(capabilities)}`,
      distinctVersions: store.capabilities.distinctVersions,
      error: undefined,
      durationMs: performance.now() - started,
    };
  } catch (error) {
    return {
      target,
      results: [],
      probe: undefined,
      declared: undefined,
      declaredNote: undefined,
      distinctVersions: undefined,
      error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
      durationMs: performance.now() - started,
    };
  }
}

const GROUP_TITLES: Record<CaseGroup, string> = {
  basics: 'basics',
  create: 'create',
  replace: 'replace',
  delete: 'delete',
  'multipart-create': 'multipart create',
  races: 'races',
  abort: 'abort',
};

// The issue's five columns first, then the rest.
const COLUMN_ORDER: readonly CaseGroup[] = [
  'create',
  'replace',
  'delete',
  'multipart-create',
  'races',
  ...CASE_GROUPS.filter(
    (group) => !['create', 'replace', 'delete', 'multipart-create', 'races'].includes(group),
  ),
];

function verdictCell(verdict: Verdict | undefined): string {
  if (!verdict) return '—';
  return verdict.outcome === 'honoured' ? 'honoured' : `**${verdict.outcome}**`;
}

/** Why a server fails a case, where that is known; the measured detail is always shown too. */
function explanationFor(measured: Measured, result: CaseResult): string | undefined {
  const server = measured.target.server;
  if (server === 'fake-gcs-server' && result.group === 'delete')
    return 'this release does not check ifGenerationMatch on DELETE (fsouza/fake-gcs-server#1282; fixed upstream by #2343, merged after v1.56.1, not in a release the Go module proxy serves yet)';
  if (server === 'minio' && result.group === 'delete')
    return 'MinIO ignores If-Match on DeleteObject (minio/minio#21677)';
  if (server === 's3rver') {
    if (result.name.startsWith('5 workers'))
      return 's3rver ignores If-Match, so concurrent increments overwrite each other (in some runs it also resets connections or answers 500 under this load)';
    if (['create', 'replace', 'delete', 'multipart-create', 'races'].includes(result.group))
      return 's3rver ignores conditional headers (its role in the suite)';
    if (result.name.includes('delimiter'))
      return 's3rver drops keys with more than one delimiter after the prefix from a delimited listing (neither listed nor rolled up)';
  }
  return undefined;
}

/** `✅ 26/26 (5 n/a)`, or `❌ 25/26 [3]` with footnotes added to `footnotes`. */
function suiteCell(
  entry: Measured,
  results: readonly CaseResult[],
  footnotes: string[],
  label: (result: CaseResult) => string,
): string {
  const run = results.filter((result) => result.outcome !== 'not-applicable');
  const notApplicable = results.length - run.length;
  const failed = run.filter((result) => result.outcome === 'failed');
  const skipped = notApplicable > 0 ? ` (${notApplicable} n/a)` : '';
  if (run.length === 0) return 'n/a';
  if (failed.length === 0) return `✅ ${run.length}/${run.length}${skipped}`;
  const marks = failed.map((result) => {
    const why = explanationFor(entry, result);
    footnotes.push(
      `${label(result)}: “${result.name}” — measured: ${shorten(result.detail)}${why ? ` — why: ${why}` : ''}`,
    );
    return footnotes.length;
  });
  return `❌ ${run.length - failed.length}/${run.length}${skipped} [${marks.join(', ')}]`;
}

function shorten(text: string): string {
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

function escapeCell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** What to declare for the adapter on this server, from the probe. */
function recommendedCapabilities(probe: ProbeReport | undefined): string {
  if (!probe) return 'not measured';
  const capabilities = recommended(probe);
  const parts = (Object.keys(capabilities) as (keyof Conditional)[]).map(
    (name) => `${name}: ${capabilities[name]}`,
  );
  return `\`{ ${parts.join(', ')} }\``;
}

function render(
  measured: readonly Measured[],
  notMeasured: readonly string[],
  environment: string,
): string {
  const lines: string[] = [];
  const footnotes: string[] = [];
  lines.push('# Compatibility of storage servers with the store interface');
  lines.push('');
  lines.push(
    `Generated by \`pnpm compat\` (scripts/compat.ts) on ${new Date().toISOString().slice(0, 10)}, ${environment}. Do not edit by hand: run it again.`,
  );
  lines.push('');
  lines.push('## Measured here');
  lines.push('');
  lines.push(
    `Every case of \`@x/store-conformance\` (${conformanceCases.length} cases) and \`probeConditionalWrites\`, run against servers started locally on 127.0.0.1 by \`@x/test-servers\`, with **every conditional capability claimed** (\`conditionalPut\`, \`conditionalDelete\`, \`multipartCreate\`) so that each conditional case meets the server's real behaviour. \`distinctVersions\` is not claimed: it is the adapter's own declaration (column “distinct versions”; \`false\` for S3, whose ETags are content hashes), so on S3 the two cases that rewrite identical bytes are not applicable. A cell gives the cases passed out of those run in that group (“n/a”: not applicable); a number in brackets points to the failure below. The probe columns say whether the server honours each condition (\`ignored\` means a write it should have refused went through); the multipart-create probe uploads two parts (5 MiB and a short last one), so on S3 it meets \`CompleteMultipartUpload\`, not a single \`PutObject\`.`,
  );
  lines.push('');
  const header = [
    'Server',
    'Version',
    'Adapter',
    'distinct versions',
    ...COLUMN_ORDER.map((group) => GROUP_TITLES[group]),
    'Probe: create',
    'replace',
    'delete',
    'multipart create',
  ];
  lines.push(`| ${header.join(' | ')} |`);
  lines.push(`| ${header.map(() => '---').join(' | ')} |`);
  for (const entry of measured) {
    const cells: string[] = [entry.target.server, entry.target.version, entry.target.adapter];
    if (entry.error) {
      footnotes.push(
        `${entry.target.server} (${entry.target.adapter}): the run failed: ${entry.error}`,
      );
      const mark = `error [${footnotes.length}]`;
      cells.push('—', ...COLUMN_ORDER.map(() => mark), '—', '—', '—', '—');
      lines.push(`| ${cells.map(escapeCell).join(' | ')} |`);
      continue;
    }
    cells.push(entry.distinctVersions ? 'yes' : '**no**');
    for (const group of COLUMN_ORDER) {
      const inGroup = entry.results.filter((result) => result.group === group);
      cells.push(
        suiteCell(
          entry,
          inGroup,
          footnotes,
          () => `${entry.target.server} ${entry.target.version}, ${GROUP_TITLES[group]}`,
        ),
      );
    }
    cells.push(
      verdictCell(entry.probe?.create),
      verdictCell(entry.probe?.replace),
      verdictCell(entry.probe?.delete),
      verdictCell(entry.probe?.multipartCreate),
    );
    lines.push(`| ${cells.map(escapeCell).join(' | ')} |`);
  }
  lines.push('');

  lines.push('### Capabilities to declare, and the full suite with them');
  lines.push('');
  lines.push(
    'What to pass as the adapter’s `capabilities` on each server, from the probe; then every case of the suite run again against the adapter configured that way — as a user would run it, and as the packages’ own tests do. A capability declared off makes the adapter refuse that mode with `NotImplementedError`: the suite then checks that refusal instead of the conditional cases (counted as n/a here).',
  );
  lines.push('');
  lines.push('| Server | Version | Adapter | `capabilities` | Full suite, as declared |');
  lines.push('| --- | --- | --- | --- | --- |');
  for (const entry of measured) {
    const suite = entry.declared
      ? suiteCell(
          entry,
          entry.declared.results,
          footnotes,
          (result) =>
            `${entry.target.server} ${entry.target.version}, as declared, ${GROUP_TITLES[result.group]}`,
        )
      : (entry.declaredNote ?? 'not measured');
    lines.push(
      `| ${entry.target.server} | ${entry.target.version} | ${entry.target.adapter} | ${recommendedCapabilities(entry.probe)} | ${escapeCell(suite)} |`,
    );
  }
  lines.push('');

  if (footnotes.length > 0) {
    lines.push('### Failures, as measured');
    lines.push('');
    footnotes.forEach((note, index) => {
      lines.push(`${index + 1}. ${escapeCell(note)}`);
    });
    lines.push('');
  }
  if (notMeasured.length > 0) {
    lines.push('### Not measured in this run');
    lines.push('');
    for (const note of notMeasured) lines.push(`- ${note}`);
    lines.push('');
  }

  lines.push('### Where a server is wrong, and what the adapter does about it');
  lines.push('');
  for (const entry of measured) {
    if (!entry.probe) continue;
    const ignored = (['create', 'replace', 'delete', 'multipartCreate'] as const).filter(
      (name) => entry.probe?.[name] && entry.probe[name]?.outcome !== 'honoured',
    );
    if (ignored.length === 0) continue;
    for (const name of ignored) {
      const verdict = entry.probe[name]!;
      lines.push(
        `- **${entry.target.server} ${entry.target.version}** ${name}: ${verdict.outcome} — ${escapeCell(verdict.evidence)}.`,
      );
    }
  }
  lines.push(
    '- The adapters do not paper over any of this: they send the condition and report what the service answers. Declare what the probe measured (table above); a capability declared off makes the adapter refuse that mode with `NotImplementedError` instead of pretending. The lease probes again at every acquire.',
  );
  lines.push(
    '- A conditional delete of a missing key: versitygw answers 204 (AWS answers 404 `NoSuchKey`), so `@x/store-s3` sends a `HeadObject` first and reports `PreconditionFailedError` when there is no object — one extra request per conditional delete.',
  );
  lines.push(
    '- Keys that are also folders (`a/b` next to `a/b/c`): versitygw’s posix backend refuses the second write (409 `ObjectParentIsFile`) and MinIO hides one of them from listings. The suite never stores such a pair, and backupd’s key layout never creates one.',
  );
  lines.push('');

  lines.push('## Documented by the services (documented, not tested here)');
  lines.push('');
  lines.push(
    'What each service’s own documentation says, looked up when this report was written. **Not tested here**: no request was sent to these services by this script. Where a row says “not documented”, assume the condition is not honoured until `probeConditionalWrites` shows otherwise on your endpoint.',
  );
  lines.push('');
  lines.push(DOCUMENTED_TABLE.trim());
  lines.push('');
  return `${lines.join('\n')}\n`;
}

const DOCUMENTED_TABLE = `
| Service | Create-if-absent (single write) | Replace-if-version | Delete-if-version | Create-if-absent at multipart completion | Notes | Sources |
| --- | --- | --- | --- | --- | --- | --- |
| AWS S3 (general purpose buckets) | \`If-None-Match: *\` on PutObject → 412 | \`If-Match: <etag>\` on PutObject → 412; 404 when the key is missing | \`If-Match\` on DeleteObject (since 2025-09) → 412; 404 \`NoSuchKey\` when the key is missing | \`If-None-Match\` / \`If-Match\` on CompleteMultipartUpload | 409 \`ConditionalRequestConflict\` when conditional writes race: retry. ETags are content hashes (same bytes, same ETag). | docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-requests.html, …/conditional-deletes.html |
| Cloudflare R2 | \`If-None-Match\` on PutObject | \`If-Match\` on PutObject | not listed among R2's conditional operations | \`If-None-Match\` / \`If-Match\` on CompleteMultipartUpload (and CreateMultipartUpload) | Use region \`auto\`. | developers.cloudflare.com/r2/api/s3/conditional-operations/ |
| Google Cloud Storage | \`ifGenerationMatch=0\` | \`ifGenerationMatch=<generation>\` | \`ifGenerationMatch\` on delete | preconditions on resumable uploads | Versions are generations (new on every write). | cloud.google.com/storage/docs/request-preconditions |
| Azure Blob Storage | \`If-None-Match: *\` on Put Blob (409 \`BlobAlreadyExists\` or 412) | \`If-Match\` on Put Blob / Put Block List | \`If-Match\` on Delete Blob | \`If-None-Match: *\` on Put Block List | ETags change on every write. | learn.microsoft.com/rest/api/storageservices/specifying-conditional-headers-for-blob-service-operations |
| MinIO | \`If-None-Match: *\` on PutObject | \`If-Match\` on PutObject | **ignored**: DeleteObject deletes whatever \`If-Match\` says (minio/minio#21677; measured above on the community build) | \`If-None-Match\` on CompleteMultipartUpload | Declare \`conditionalDelete: false\`. | github.com/minio/minio/issues/21677 |
| Tigris | \`If-None-Match: "*"\` on PUT → 412 | \`If-Match\` → 412 | its docs describe preconditions for deletes as well | not documented for multipart | Docs recommend \`X-Tigris-Consistent: true\` on conditional requests for some bucket location types; this adapter does not send it. | tigrisdata.com/docs/objects/conditionals/ |
| Ceph RGW | \`If-None-Match\` on PUT (rgw since 2014, ceph/ceph#2756; fixed with conditional delete in ceph/ceph#63348, 2025) | \`If-Match\` on PUT (same) | \`If-Match\` on DeleteObject (ceph/ceph#63348; IBM Storage Ceph docs) | not documented | Upstream docs.ceph.com object-operation pages do not list these headers; behaviour depends on the release. | github.com/ceph/ceph/pull/63348, ibm.com/docs/en/storage-ceph (S3 delete an object) |
`;

async function main(): Promise<void> {
  const started = await startTestServers({ requireAll: false });
  const notMeasured: string[] = started.servers.missing.map(
    (entry) => `${entry.name}: ${entry.reason.split('\n')[0]}`,
  );
  try {
    const targets: Target[] = [];
    for (const server of started.servers.s3) {
      targets.push({
        server: server.name,
        version: server.version,
        adapter: '@x/store-s3',
        createStore: (capabilities) =>
          new S3Store({
            bucket: server.bucket,
            endpoint: server.endpoint,
            region: server.region,
            forcePathStyle: server.forcePathStyle,
            credentials: {
              accessKeyId: server.accessKeyId,
              secretAccessKey: server.secretAccessKey,
            },
            capabilities,
          }),
      });
    }

    const azure = await loadAdapter('@x/store-azure', 'AzureBlobStore');
    for (const server of started.servers.azure) {
      if ('missing' in azure) {
        notMeasured.push(
          `${server.name} ${server.version}: @x/store-azure not available: ${azure.missing}`,
        );
        continue;
      }
      const AzureBlobStore = azure.value as new (options: {
        connectionString: string;
        container: string;
      }) => ObjectStore;
      targets.push({
        server: server.name,
        version: server.version,
        adapter: '@x/store-azure',
        // No capabilities option: Azure honours every condition. Declaring less is not possible.
        createStore: (capabilities) =>
          capabilities.conditionalPut &&
          capabilities.conditionalDelete &&
          capabilities.multipartCreate
            ? new AzureBlobStore({
                connectionString: server.connectionString,
                container: server.container,
              })
            : undefined,
      });
    }

    const gcs = await loadAdapter('@x/store-gcs', 'GcsStore');
    for (const server of started.servers.gcs) {
      if ('missing' in gcs) {
        notMeasured.push(
          `${server.name} ${server.version}: @x/store-gcs not available: ${gcs.missing}`,
        );
        continue;
      }
      const GcsStore = gcs.value as new (options: {
        bucket: string;
        apiEndpoint: string;
        projectId: string;
        capabilities: Conditional;
      }) => ObjectStore;
      targets.push({
        server: server.name,
        version: server.version,
        adapter: '@x/store-gcs',
        createStore: (capabilities) =>
          new GcsStore({
            bucket: server.bucket,
            apiEndpoint: server.apiEndpoint,
            projectId: server.projectId,
            capabilities,
          }),
      });
    }

    // Servers are independent: measure them side by side.
    const measured = await Promise.all(targets.map((target) => measure(target)));
    const environment = `Node ${process.version}, ${process.platform}/${process.arch}`;
    await writeFile(outputFile, render(measured, notMeasured, environment));

    for (const entry of measured) {
      const failed = entry.results.filter((result) => result.outcome === 'failed').length;
      const passed = entry.results.filter((result) => result.outcome === 'passed').length;
      const declared = entry.declared
        ? `; as declared ${JSON.stringify(entry.declared.capabilities)}: ${entry.declared.results.filter((result) => result.outcome === 'passed').length} passed, ${entry.declared.results.filter((result) => result.outcome === 'failed').length} failed, ${entry.declared.results.filter((result) => result.outcome === 'not-applicable').length} n/a`
        : '';
      const probe = entry.probe
        ? `probe create=${entry.probe.create.outcome} replace=${entry.probe.replace.outcome} delete=${entry.probe.delete.outcome} multipart=${entry.probe.multipartCreate?.outcome ?? '-'}`
        : `error: ${entry.error}`;
      console.log(
        `compat: ${entry.target.server} ${entry.target.version} (${entry.target.adapter}): ${passed} passed, ${failed} failed; ${probe}${declared} [${Math.round(entry.durationMs)} ms]`,
      );
    }
    for (const note of notMeasured) console.log(`compat: not measured: ${note}`);
    console.log(`compat: wrote ${outputFile}`);
  } finally {
    await started.stop();
  }
}

await main();
