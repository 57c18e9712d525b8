/**
 * No import cycle among apps/backupd/src's files: command modules depend on
 * cli/command.ts, never on main.ts (which lists them). Type-only imports
 * count too: a cycle of types is still a knot in the design.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { findCycles, importGraph } from './helpers/import-graph.ts';

const SOURCE = fileURLToPath(new URL('../src', import.meta.url));

describe('the import graph of apps/backupd/src', () => {
  it('has no cycle', () => {
    expect(findCycles(importGraph(SOURCE))).toEqual([]);
  });

  it('is read: the entry reaches every command module, and they reach cli/command.ts', () => {
    const graph = importGraph(SOURCE);
    for (const name of ['replicate', 'restore', 'ls', 'verify', 'check', 'lease']) {
      expect(graph.get('main.ts')).toContain(`commands/${name}-command.ts`);
      expect(graph.get(`commands/${name}-command.ts`)).toContain('cli/command.ts');
      expect(graph.get(`commands/${name}-command.ts`)).not.toContain('main.ts');
    }
  });
});

describe('findCycles (meta: the check above can fail)', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'backupd-import-graph-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('finds a cycle made of a type import, a re-export and a dynamic import, and ignores comments', () => {
    const root = join(scratch, 'cyclic');
    mkdirSync(join(root, 'commands'), { recursive: true });
    writeFileSync(join(root, 'main.ts'), "export const table = [import('./commands/ls.ts')];\n");
    writeFileSync(
      join(root, 'commands/ls.ts'),
      "import type { Context } from './shared.ts';\nexport const ls = (c: Context) => c;\n",
    );
    writeFileSync(
      join(root, 'commands/shared.ts'),
      "export { table } from '../main.ts';\nexport type Context = object;\n",
    );
    // A comment or a string naming an import is not one.
    writeFileSync(
      join(root, 'leaf.ts'),
      "// import { x } from './main.ts';\nexport const text = \"import('./leaf.ts')\";\n",
    );
    expect(findCycles(importGraph(root))).toEqual([
      ['commands/ls.ts', 'commands/shared.ts', 'main.ts'],
    ]);
  });

  it('finds a file importing itself, and nothing in a graph without cycles', () => {
    expect(findCycles(new Map([['a.ts', ['a.ts']]]))).toEqual([['a.ts']]);
    expect(
      findCycles(
        new Map([
          ['a.ts', ['b.ts', 'c.ts']],
          ['b.ts', ['c.ts']],
          ['c.ts', []],
        ]),
      ),
    ).toEqual([]);
  });
});
