/**
 * The soak compares restores with the writer's records by the same content
 * hash the SQLite tests use (schema and every row, blobs included; equal
 * hashes mean equal data, whatever the page layout). The writer's
 * `soak_clock` row holds the commit number, so no two commits of one run
 * share a hash: a hash names exactly one writer commit.
 */
export { contentHash } from '../packages/backup-worker/test/sqlite/content-hash.ts';
