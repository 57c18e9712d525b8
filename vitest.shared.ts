/**
 * The shape every package's vitest project shares: workspace packages resolve
 * to their TypeScript sources (the `@x/source` export condition), so tests run
 * without a build; unit tests live beside the code, integration tests in test/.
 */
import { defineProject, mergeConfig, type ViteUserConfig } from 'vitest/config';

// Vite's default server conditions with ours first, less `module`: with it,
// Vite picks the AWS SDK's bundler-only `dist-es` build, whose extensionless
// imports Node cannot load.
const conditions = ['@x/source', 'node', 'development|production'];

/**
 * Test files that measure behaviour under a load they make themselves (an
 * application committing back to back, a WAL restart under it): they run in
 * a group of their own (`sequence.groupOrder`), one file at a time, never
 * beside other test files, so the suite's other files do not take the CPU
 * they measure with.
 */
export const ALONE_TEST_FILES = ['src/**/*.alone.test.ts', 'test/**/*.alone.test.ts'];

function project(name: string, test: NonNullable<ViteUserConfig['test']>): ViteUserConfig {
  return defineProject({
    resolve: { conditions },
    ssr: { resolve: { conditions, externalConditions: ['@x/source'] } },
    test: { name, testTimeout: 60_000, hookTimeout: 120_000, ...test },
  });
}

export function packageProject(name: string, extra: ViteUserConfig = {}): ViteUserConfig {
  return mergeConfig(
    project(name, {
      include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
      exclude: ['**/node_modules/**', ...ALONE_TEST_FILES],
    }),
    extra,
  );
}

/**
 * The `*.alone.test.ts` files of the package at `root` (a path from the
 * repository's root), as a project of the last group: see
 * {@link ALONE_TEST_FILES}.
 */
export function aloneProject(name: string, root: string): ViteUserConfig {
  return {
    ...project(`${name} (alone)`, {
      include: ALONE_TEST_FILES,
      fileParallelism: false,
      sequence: { groupOrder: 1 },
    }),
    root,
  };
}
