export { randomPrefix, testServers } from './inject.ts';
export type {
  AzureTestServer,
  GcsTestServer,
  MissingServer,
  S3TestServer,
  TestServers,
} from './types.ts';
