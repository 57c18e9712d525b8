import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  isStale,
  settingsTable,
  TABLE_END,
  TABLE_START,
  withSettingsTable,
} from './readme-table.ts';

const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

describe("the README's table of settings", () => {
  it('is the one the rows give (else run `pnpm --filter backupd settings-table`)', () => {
    expect(withSettingsTable(README)).toBe(README);
    expect(isStale(README)).toBe(false);
  });
});

describe('isStale (meta: the check above can fail)', () => {
  const table = settingsTable();
  // The README as it is once the table is written, whatever the file holds now.
  const current = withSettingsTable(README, table);

  it('reports a table with one cell changed, a row missing or a row added', () => {
    expect(isStale(current)).toBe(false);
    const oneCell = current.replace('| `intervalMs` |', '| `intervalMillis` |');
    expect(oneCell).not.toBe(current);
    expect(isStale(oneCell)).toBe(true);
    const firstRow = table.split('\n')[2]!;
    expect(isStale(current.replace(`${firstRow}\n`, ''))).toBe(true);
    expect(isStale(current.replace(firstRow, `${firstRow}\n${firstRow}`))).toBe(true);
  });

  it('leaves the text outside the markers alone, and refuses a README without them', () => {
    const edited = current.replace('## CPU priority', '## CPU priority, edited');
    expect(isStale(edited)).toBe(false);
    expect(withSettingsTable(`a\n${TABLE_START}\nold\n${TABLE_END}\nb\n`, table)).toBe(
      `a\n${TABLE_START}\n\n${table}\n\n${TABLE_END}\nb\n`,
    );
    expect(() => isStale(current.replace(TABLE_END, ''))).toThrow(TABLE_START);
    expect(() => withSettingsTable(`${TABLE_END}\n${TABLE_START}\n`)).toThrow(TABLE_START);
  });
});
