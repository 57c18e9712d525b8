import { defineConfig } from 'vitest/config';

// One run over every package's project, with one summary. The JSON report is
// what .ci/run counts its closing line from.
export default defineConfig({
  test: {
    projects: ['packages/*/vitest.config.ts', 'apps/*/vitest.config.ts', 'tools/vitest.config.ts'],
    globalSetup: ['packages/test-servers/src/global-setup.ts'],
    reporters: ['default', ['json', { outputFile: '.ci/vitest-report.json' }]],
  },
});
