/**
 * The README's table of settings, written from the rows between two markers
 * (`pnpm --filter backupd settings-table` writes it; a test fails while the
 * README's differs).
 */
import {
  DATABASE_SETTINGS,
  type DatabaseSetting,
  type PackageConstants,
} from './database-settings.ts';
import { ENCRYPTION_SETTINGS, OTHER_SETTINGS, type OtherSetting } from './other-settings.ts';

export const TABLE_START = '<!-- settings-table:start -->';
export const TABLE_END = '<!-- settings-table:end -->';

const HEADER = [
  'YAML key',
  'environment variable',
  'command line',
  'field',
  'worker option',
  'default',
  'accepted',
  'owning constants',
  'what it sets',
];

const code = (text: string): string => `\`${text}\``;

function databaseCells(setting: DatabaseSetting): string[] {
  const { variable, value, workerOption: option } = setting;
  const note = value.reading.note === undefined ? '' : ` (${value.reading.note})`;
  const greater = setting.greaterThan?.split('.').pop();
  return [
    code(setting.key),
    `${code(variable)}${note}`,
    '—',
    code(setting.field),
    `${code(option.owner)} ${option.options.map(code).join(' or ')}`,
    code(value.show(setting.default)),
    greater === undefined ? value.accepted : `${value.accepted}, greater than ${code(greater)}`,
    constantsCell(setting.constants),
    setting.help,
  ];
}

function otherCells(setting: OtherSetting): string[] {
  const keys = setting.keys.map(code).join(', ');
  return [
    setting.level === 'top' ? `${keys} (top level)` : keys,
    setting.variable === undefined ? '—' : code(setting.variable),
    setting.commandLine === undefined ? '—' : code(setting.commandLine),
    code(setting.field),
    setting.goesTo,
    setting.default,
    setting.accepted,
    constantsCell(setting.constants),
    setting.help,
  ];
}

function constantsCell(constants: PackageConstants | undefined): string {
  if (constants === undefined) return '—';
  return `${code(constants.package)} ${Object.keys(constants.values).map(code).join(', ')}`;
}

/** The table: where a database is, its settings, then the top level's. */
export function settingsTable(): string {
  const rows = [
    ...OTHER_SETTINGS.filter((setting) => setting.level === 'database').map(otherCells),
    ...DATABASE_SETTINGS.map(databaseCells),
    ...ENCRYPTION_SETTINGS.map(otherCells),
    ...OTHER_SETTINGS.filter((setting) => setting.level === 'top').map(otherCells),
  ];
  const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
  return [line(HEADER), line(HEADER.map(() => '---')), ...rows.map(line)].join('\n');
}

/**
 * `readme` with `table` between the markers (a blank line either side).
 * @throws when the markers are missing or out of order.
 */
export function withSettingsTable(readme: string, table: string = settingsTable()): string {
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  if (start === -1 || end < start)
    throw new Error(`README: no ${TABLE_START} … ${TABLE_END} to write the settings table between`);
  return `${readme.slice(0, start + TABLE_START.length)}\n\n${table}\n\n${readme.slice(end)}`;
}

/** Whether the README's table differs from the one the rows give. */
export function isStale(readme: string, table: string = settingsTable()): boolean {
  return withSettingsTable(readme, table) !== readme;
}
