import { defineConfig } from 'vitest/config';
import { aloneProject } from './vitest.shared.ts';

// One run over every package's project, with one summary. The JSON report is
// what .ci/run counts its closing line from.
export default defineConfig({
  test: {
    projects: [
      'packages/*/vitest.config.ts',
      'apps/*/vitest.config.ts',
      'tools/vitest.config.ts',
      // A group of their own, one file at a time (see ALONE_TEST_FILES).
      aloneProject('source-sqlite', 'packages/source-sqlite'),
      aloneProject('backupd', 'apps/backupd'),
    ],
    globalSetup: ['packages/test-servers/src/global-setup.ts'],
    reporters: ['default', ['json', { outputFile: '.ci/vitest-report.json' }]],
  },
});
