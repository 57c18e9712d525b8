/**
 * docs/log-events.md lists every log event the product emits, and nothing
 * else. The names are read from the sources of packages/<name>/src (test
 * packages excepted) and apps/backupd/src, in two shapes:
 * - library loggers: `logger.info('backup.step_failed', …)` (also `.warn`,
 *   `.error`, `.debug` and `.debug?.(`), the name possibly on the next line;
 * - the app's own pino events: object literals `{ event: 'backupd.database_locked', … }`,
 *   read in apps/backupd/src only (a package's `event: 'drain'` is a
 *   parameter's type, not a log event).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const DOC = join(ROOT, 'docs/log-events.md');
const APP_SOURCE = join(ROOT, 'apps/backupd/src');
/** Packages that ship no product code. */
const TEST_PACKAGES = new Set(['integration-tests', 'test-faults', 'test-servers']);

/** `.info(`, `.warn(`, `.error(`, `.debug(` or `.debug?.(`, then a dotted name as the first argument. */
const LIBRARY_CALL =
  /\.(?:debug|info|warn|error)(?:\?\.)?\(\s*['"]([a-z][a-z0-9]*\.[a-z0-9_.-]+)['"]/g;
/** `event: 'name'`, but not a parameter's type (`(event: 'exit'`, `event: 'exit' | 'error'`). */
const EVENT_LITERAL = /(?<!\(\s*)\bevent:\s*['"]([a-z][a-z0-9_.-]*)['"](?!\s*\|)/g;
/** The one naming convention: `<area>.<name>`, the name in snake_case. */
const EVENT_NAME = /^(lease|backup|backupd)\.[a-z][a-z0-9]*(_[a-z0-9]+)*$/;
/** A table row whose first cell is one name in backticks. */
const DOC_ROW = /^\|\s*`([^`]+)`\s*\|/gm;

/** Comments that start a line: a name in a comment is not emitted. */
function withoutComments(text: string): string {
  return text.replace(/^\s*\/\*[\s\S]*?\*\//gm, '').replace(/^\s*\/\/.*$/gm, '');
}

/** The event names in one source text; `objectLiterals` also reads `event: '…'`. */
function eventsInSource(text: string, objectLiterals: boolean): string[] {
  const code = withoutComments(text);
  const names = [...code.matchAll(LIBRARY_CALL)].map((match) => match[1]!);
  if (objectLiterals) names.push(...[...code.matchAll(EVENT_LITERAL)].map((match) => match[1]!));
  return names;
}

/** The names in the first column of the document's tables, in order. */
function eventsInDoc(markdown: string): string[] {
  return [...markdown.matchAll(DOC_ROW)].map((match) => match[1]!);
}

function sourceFiles(directory: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'dist' && entry.name !== 'node_modules') files.push(...sourceFiles(path));
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) files.push(path);
  }
  return files;
}

/** Every event name in the product's sources, with the files that emit it. */
function eventsInCode(): Map<string, string[]> {
  const packages = readdirSync(join(ROOT, 'packages'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && !TEST_PACKAGES.has(entry.name))
    .map((entry) => join(ROOT, 'packages', entry.name, 'src'))
    .filter((source) => existsSync(source));
  const found = new Map<string, string[]>();
  for (const root of [...packages, APP_SOURCE]) {
    for (const file of sourceFiles(root)) {
      const text = readFileSync(file, 'utf8');
      for (const name of eventsInSource(text, root === APP_SOURCE)) {
        const where = relative(ROOT, file);
        const files = found.get(name) ?? [];
        if (!files.includes(where)) files.push(where);
        found.set(name, files);
      }
    }
  }
  return found;
}

describe('docs/log-events.md', () => {
  const code = eventsInCode();
  const listed = eventsInDoc(readFileSync(DOC, 'utf8'));

  it('lists every event the code emits', () => {
    const missing = [...code.keys()]
      .filter((name) => !listed.includes(name))
      .sort()
      .map((name) => `${name} (${code.get(name)!.join(', ')})`);
    expect(
      missing,
      `emitted by the code but not in docs/log-events.md: ${missing.join('; ')}`,
    ).toEqual([]);
  });

  it('lists no event the code no longer emits', () => {
    const stale = listed.filter((name) => !code.has(name)).sort();
    expect(stale, `in docs/log-events.md but emitted nowhere: ${stale.join(', ')}`).toEqual([]);
  });

  it('names every event one way: <area>.<snake_case>', () => {
    const offending = [...code.keys()].filter((name) => !EVENT_NAME.test(name)).sort();
    expect(offending, `event names off the convention: ${offending.join(', ')}`).toEqual([]);
  });

  it('lists each event once', () => {
    const twice = listed.filter((name, index) => listed.indexOf(name) !== index);
    expect(twice, `listed more than once: ${twice.join(', ')}`).toEqual([]);
  });
});

describe('the extraction (meta: the checks above can fail)', () => {
  it('finds both shapes in the real sources, and no parameter type', () => {
    const code = eventsInCode();
    expect(code.size).toBeGreaterThan(50);
    // The name on the line after `.info(`, a library call, an app literal.
    expect(code.get('backup.new_lineage')).toEqual(['packages/backup-worker/src/backup-worker.ts']);
    expect(code.get('lease.acquired')).toEqual(['packages/lease/src/bucket-lease.ts']);
    expect(code.get('backupd.database_locked')).toEqual([
      'apps/backupd/src/commands/replicate-command.ts',
    ]);
    for (const notAnEvent of ['exit', 'error', 'drain']) expect(code.has(notAnEvent)).toBe(false);
  });

  it('reads a sample source', () => {
    const sample = [
      'this.#logger.info(',
      "  'backup.sample_event',",
      '  { lineage },',
      ');',
      "logger.warn('lease.sample-warning', { key });",
      "o.logger.debug?.('backup.sample_debug', { tookMs });",
      "logger.error({ event: 'sample-app-event', ...errorFields(error) });",
      "logger.info({ event: 'backupd.sample_app_event' });",
      'const fields = {',
      "  event: 'sample-literal',",
      '  database,',
      '};',
      "on(event: 'exit', listener: () => void): this;",
      "  event: 'exit' | 'error',",
      "// logger.info('backup.commented_out', {});",
      "logger.info('not an event name');",
    ].join('\n');
    expect(eventsInSource(sample, true)).toEqual([
      'backup.sample_event',
      'lease.sample-warning',
      'backup.sample_debug',
      'sample-app-event',
      'backupd.sample_app_event',
      'sample-literal',
    ]);
    expect(eventsInSource(sample, false)).toEqual([
      'backup.sample_event',
      'lease.sample-warning',
      'backup.sample_debug',
    ]);
  });

  it('reads a sample table, first column only', () => {
    const markdown = [
      '# Log events',
      '',
      'Text naming `not-a-row` is not read.',
      '',
      '| event | level | when it is logged | notable fields |',
      '| --- | --- | --- | --- |',
      '| `lease.sample` | warn | A sample. | `key`, `instanceId` |',
      '| `sample-app-event` | info | Another. | — |',
    ].join('\n');
    expect(eventsInDoc(markdown)).toEqual(['lease.sample', 'sample-app-event']);
  });

  it('tells names off the convention', () => {
    for (const good of ['backup.step_failed', 'lease.acquired', 'backupd.stopped_incomplete'])
      expect(EVENT_NAME.test(good), good).toBe(true);
    for (const bad of ['lease.release-failed', 'stopped-incomplete', 'backup.stepFailed', 'app.x'])
      expect(EVENT_NAME.test(bad), bad).toBe(false);
  });
});
