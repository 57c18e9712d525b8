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

export function packageProject(name: string, extra: ViteUserConfig = {}): ViteUserConfig {
  return mergeConfig(
    defineProject({
      resolve: { conditions },
      ssr: { resolve: { conditions, externalConditions: ['@x/source'] } },
      test: {
        name,
        include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
        testTimeout: 60_000,
        hookTimeout: 120_000,
      },
    }),
    extra,
  );
}
