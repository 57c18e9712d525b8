/**
 * The shared conformance suite (`@x/store-conformance`) and the probe,
 * against the real S3 servers the harness runs (one test file per server, so
 * they run in parallel).
 *
 * On versitygw and MinIO the full suite runs with the capabilities the
 * adapter is configured with there (helpers.ts) and every case must pass;
 * the only cases not run are those that configuration makes not applicable,
 * and that set is pinned. On s3rver, which ignores conditional headers, the
 * conditional cases must fail — exactly the listed ones — and the probe must
 * say `ignored`.
 */
import {
  type CaseResult,
  conformanceCases,
  notApplicableReason,
  type ProbeReport,
  probeConditionalWrites,
  runConformanceCases,
} from '@x/store-conformance';
import { describeStoreConformance } from '@x/store-conformance/vitest';
import { randomPrefix, type S3TestServer, testServers } from '@x/test-servers';
import { beforeAll, describe, expect, it } from 'vitest';
import { CLAIMING_ALL, declaredCapabilities, storeFor } from './helpers.ts';

const caseNames = new Set(conformanceCases.map((testCase) => testCase.name));

/**
 * On s3rver with every capability claimed, these conditional cases fail —
 * and only these, within the conditional groups. (The same-bytes case is not
 * applicable: S3 declares `distinctVersions: false`. A conditional delete of
 * a missing key passes: the adapter's HEAD finds no object.)
 */
export const S3RVER_CONDITIONAL_FAILURES: readonly string[] = [
  'create of an existing key fails with AlreadyExistsError and keeps the first content',
  'update with a stale version fails with PreconditionFailedError and keeps the content',
  'update of a missing key fails with PreconditionFailedError and creates nothing',
  'conditional delete with a stale version fails with PreconditionFailedError and keeps the object',
  'a 20 MiB streaming upload in create mode; a second create fails with AlreadyExistsError and the first stays byte-identical',
  '32 concurrent creates of one key: exactly one succeeds, 31 fail with AlreadyExistsError',
  '5 workers × 10 read-modify-write increments with ifMatch and retry reach exactly 50',
];

/** The cases that need distinct versions of identical bytes, which S3 does not give. */
const SAME_BYTES_CASES: readonly string[] = [
  'the version changes on every write, also when the same bytes are written again',
  'rewriting the same bytes with ifMatch yields a new version and makes the old one stale',
];

function serverNamed(name: string): S3TestServer | undefined {
  return testServers().s3.find((server) => server.name === name);
}

function missingLine(name: string): string {
  const reason =
    testServers().missing.find((entry) => entry.name === name)?.reason ?? 'not running';
  return `${name}: ${reason.split('\n')[0]} (pnpm servers:install)`;
}

/** Checks that the expectation lists name real cases (a renamed case must not silently drop a check). */
export function describeExpectationLists(): void {
  it('names only cases that exist in the conformance suite', () => {
    const named = [...S3RVER_CONDITIONAL_FAILURES, ...SAME_BYTES_CASES];
    expect(named.filter((name) => !caseNames.has(name))).toEqual([]);
  });
}

/** The full suite on a server that honours conditional writes: every applicable case passes. */
export function describeConditionalServerConformance(name: 'versitygw' | 'minio'): void {
  const server = serverNamed(name);
  if (!server) {
    describe.skipIf(true)(missingLine(name), () => {
      it('is skipped', () => {});
    });
    return;
  }
  const declared = declaredCapabilities(server);

  describeStoreConformance(`S3Store on ${server.name} ${server.version}`, {
    createStore: () => storeFor(server, randomPrefix(`conformance-${server.name}`)),
    capabilities: declared,
    timeoutMs: 120_000,
  });

  describe(`S3Store on ${server.name} ${server.version}: what the suite skips, and the probe`, () => {
    it('skips only the cases its configuration makes not applicable', () => {
      const store = storeFor(server, randomPrefix(`not-applicable-${server.name}`));
      expect(store.capabilities).toEqual(declared);
      const skipped = conformanceCases
        .filter(
          (testCase) =>
            notApplicableReason(testCase, store.capabilities, store.capabilities) !== undefined,
        )
        .map((testCase) => testCase.name);
      const conditionalDeleteCases = [
        'conditional delete with the current version removes the object',
        'conditional delete with a stale version fails with PreconditionFailedError and keeps the object',
        'conditional delete of a missing key fails with PreconditionFailedError',
      ];
      expect(skipped.sort()).toEqual(
        [
          ...SAME_BYTES_CASES,
          'a store that declares no conditional put refuses create and ifMatch with NotImplementedError',
          'a store that declares no multipart create refuses upload in create mode with NotImplementedError',
          ...(server.name === 'minio'
            ? conditionalDeleteCases
            : [
                'a store that declares no conditional delete refuses ifMatch with NotImplementedError and deletes nothing',
              ]),
        ].sort(),
      );
    });

    it('probe: create, replace and multipart create are honoured; delete as declared', async () => {
      // The probe runs on a store claiming everything: it measures the server, not the configuration.
      const claimingAll = storeFor(server, randomPrefix(`probe-${server.name}`), {
        capabilities: CLAIMING_ALL,
      });
      const probe = await probeConditionalWrites(claimingAll, 'probe');
      expect(probe.create.outcome).toBe('honoured');
      expect(probe.replace.outcome).toBe('honoured');
      expect(probe.multipartCreate?.outcome).toBe('honoured');
      expect(probe.delete.outcome).toBe(declared.conditionalDelete ? 'honoured' : 'ignored');
      expect(probe.cleanupError).toBeUndefined();
    }, 120_000);
  });
}

/** s3rver ignores conditional headers: exactly the listed conditional cases fail, and the probe says so. */
export function describeS3rverConformance(): void {
  const s3rver = serverNamed('s3rver');
  if (!s3rver) {
    describe.skipIf(true)(missingLine('s3rver'), () => {
      it('is skipped', () => {});
    });
    return;
  }
  describe(`conformance of S3Store on s3rver ${s3rver.version} (ignores conditional headers)`, () => {
    let results: CaseResult[] = [];
    let probe: ProbeReport | undefined;

    beforeAll(async () => {
      // Claim every capability, so every conditional case runs and meets the server's real behaviour.
      const store = storeFor(s3rver!, randomPrefix('conformance-s3rver'), {
        capabilities: CLAIMING_ALL,
      });
      results = await runConformanceCases(store, {
        prefix: 'run',
        capabilities: CLAIMING_ALL,
        groups: ['create', 'replace', 'delete', 'multipart-create', 'races'],
      });
      probe = await probeConditionalWrites(store, 'probe');
    }, 300_000);

    it('fails exactly the conditional cases listed, and passes the other conditional-group cases', () => {
      const failed = results
        .filter((result) => result.outcome === 'failed')
        .map((result) => result.name);
      expect(failed.sort()).toEqual([...S3RVER_CONDITIONAL_FAILURES].sort());
      const passed = results
        .filter((result) => result.outcome === 'passed')
        .map((result) => result.name);
      expect(passed).toEqual(
        expect.arrayContaining([
          'create of a new key succeeds and get returns its bytes and version',
          'conditional delete of a missing key fails with PreconditionFailedError',
        ]),
      );
      const notApplicable = results
        .filter((result) => result.outcome === 'not-applicable')
        .map((result) => result.name);
      expect(notApplicable).toContain(SAME_BYTES_CASES[1]);
    });

    it('probe reports create and replace (and delete, multipart create) as ignored', () => {
      expect(probe?.create.outcome).toBe('ignored');
      expect(probe?.replace.outcome).toBe('ignored');
      expect(probe?.delete.outcome).toBe('ignored');
      expect(probe?.multipartCreate?.outcome).toBe('ignored');
    });
  });
}
