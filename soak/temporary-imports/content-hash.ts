/**
 * The soak compares restores with the writer's records by the same content
 * hash the SQLite tests use (schema and every row, blobs included; equal
 * hashes mean equal data, whatever the page layout). The writer's
 * `soak_clock` row holds the commit number, so no two commits of one run
 * share a hash: a hash names exactly one writer commit.
 *
 * TEMPORARY relative import (see the root README, "How dependencies are
 * checked"): the hash is a test helper of @x/backup-worker's SQLite tests
 * (packages/backup-worker/test/sqlite/content-hash.ts), needed by those tests
 * and the soak alike, so it must live in one place both can import by name
 * (a private test-utility package). Remove this file then.
 * `.dependency-cruiser.cjs` allows this one file to reach into
 * packages/backup-worker/test.
 */
export { contentHash } from '../../packages/backup-worker/test/sqlite/content-hash.ts';
