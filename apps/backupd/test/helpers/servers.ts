/** The S3 test servers these suites need, and a direct store for looking into a prefix. */
import { S3Store } from '@x/store-s3';
import { type S3TestServer, testServers } from '@x/test-servers';

export function s3Server(name: S3TestServer['name']): S3TestServer | undefined {
  return testServers().s3.find((server) => server.name === name);
}

/** One line saying why a suite is skipped; under CI=true the setup itself fails instead. */
export function missingReason(name: string): string {
  const missing = testServers().missing.find((entry) => entry.name === name);
  return missing ? missing.reason.split('\n')[0]! : `${name} is not running`;
}

export function directStore(server: S3TestServer): S3Store {
  return new S3Store({
    bucket: server.bucket,
    endpoint: server.endpoint,
    region: server.region || 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
  });
}
