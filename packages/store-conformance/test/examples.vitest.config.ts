/**
 * The configuration of the vitest run examples.test.ts starts as a child
 * process: the suites in examples/, as an outside author runs them, with the
 * package names resolving to this repository's sources.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const conditions = ['@x/source', 'node', 'development|production'];

export default defineConfig({
  root: fileURLToPath(new URL('../examples/', import.meta.url)),
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['@x/source'] } },
  test: { include: ['*.test.mjs'], testTimeout: 60_000 },
});
