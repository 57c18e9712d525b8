// `pnpm --filter backupd settings-table`: writes the README's table of
// settings from their rows (src/settings/) between its two markers. A test
// (src/settings/readme-table.test.ts) fails while the README's is stale.
import { readFileSync, writeFileSync } from 'node:fs';
import { withSettingsTable } from '../src/settings/readme-table.ts';

const readme = new URL('../README.md', import.meta.url);
const before = readFileSync(readme, 'utf8');
const after = withSettingsTable(before);
if (after !== before) writeFileSync(readme, after);
process.stdout.write(
  `README.md: settings table ${after === before ? 'already current' : 'written'}\n`,
);
