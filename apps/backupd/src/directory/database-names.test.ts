import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseStoreUrl } from '../store-url.ts';
import { globMatcher, scanDirectory } from './database-names.ts';
import { directoryLayout } from './directory-layout.ts';

function tree(files: readonly string[]): string {
  const root = mkdtempSync(join(tmpdir(), 'directory-names-'));
  for (const file of files) {
    const path = join(root, ...file.split('/'));
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(path, '');
  }
  return root;
}

const s3 = directoryLayout(parseStoreUrl('s3://bucket/tenants'));
const file = directoryLayout(parseStoreUrl('/var/backups/tenants'));

describe('globMatcher', () => {
  it.each([
    ['*.db', 'a.db', true],
    ['*.db', 'a.db-wal', false],
    ['*.db', 'adb', false],
    ['tenant-?.db', 'tenant-7.db', true],
    ['tenant-?.db', 'tenant-77.db', false],
    ['[ab]*.db', 'b1.db', true],
    ['[!ab]*.db', 'b1.db', false],
    ['[!ab]*.db', 'c1.db', true],
    ['a+b(c).db', 'a+b(c).db', true],
    ['a.db', 'aXdb', false],
  ])('%s on %s: %s', (pattern, name, expected) => {
    expect(globMatcher(pattern)(name)).toBe(expected);
  });

  it('refuses a pattern with a directory in it', () => {
    expect(() => globMatcher('sub/*.db')).toThrow(/file name glob/);
    expect(() => globMatcher('')).toThrow(/file name glob/);
  });
});

describe('scanDirectory', () => {
  it('finds matching regular files only: no hidden names, companions, symlinks or other names', () => {
    const root = tree([
      'a.db',
      'a.db-wal',
      'a.db-shm',
      'b.db',
      '.hidden.db',
      '.a.db-backupd/lock',
      'notes.txt',
      'sub/c.db',
    ]);
    symlinkSync(join(root, 'a.db'), join(root, 'link.db'));
    symlinkSync(join(root, 'sub'), join(root, 'linked-dir'));
    const flat = scanDirectory(root, {
      pattern: '*.db',
      recursive: false,
      locationOf: s3.locationOf,
    });
    expect(flat.databases.map((db) => db.relative)).toEqual(['a.db', 'b.db']);
    expect(flat.refused).toEqual([]);
    const deep = scanDirectory(root, {
      pattern: '*.db',
      recursive: true,
      locationOf: s3.locationOf,
    });
    expect(deep.databases.map((db) => [db.relative, db.location.prefix])).toEqual([
      ['a.db', 'tenants/a.db'],
      ['b.db', 'tenants/b.db'],
      ['sub/c.db', 'tenants/sub/c.db'],
    ]);
    expect(deep.databases[2]!.path).toBe(join(root, 'sub', 'c.db'));
  });

  it('puts a file:// database in a directory of its own under the URL, restorable by its own URL', () => {
    const root = tree(['a.db', 'sub/c.db']);
    const { databases } = scanDirectory(root, {
      pattern: '*.db',
      recursive: true,
      locationOf: file.locationOf,
    });
    expect(databases.map((db) => db.location)).toEqual([
      parseStoreUrl('/var/backups/tenants/a.db'),
      parseStoreUrl('/var/backups/tenants/sub/c.db'),
    ]);
  });

  it('refuses names that would share a prefix, or name no safe key, and keeps the others', () => {
    const root = tree(['Tenant.db', 'tenant.db', 'back\\slash.db', 'ok.db', 'backup/x.db']);
    const { databases, refused } = scanDirectory(root, {
      pattern: '*.db',
      recursive: true,
      locationOf: file.locationOf,
    });
    expect(databases.map((db) => db.relative)).toEqual(['Tenant.db', 'ok.db']);
    expect(refused.map((error) => [error.relative, error.code])).toEqual([
      ['back\\slash.db', 'DATABASE_NAME_REFUSED'],
      ['backup/x.db', 'DATABASE_NAME_REFUSED'],
      ['tenant.db', 'DATABASE_NAME_REFUSED'],
    ]);
    expect(refused[0]!.message).toMatch(/backslash/);
    expect(refused[1]!.message).toMatch(/"backup\/" is where a file:\/\/ backup/);
    expect(refused[2]!.message).toMatch(/"Tenant.db"'s only by case/);
  });

  it('never maps two databases to one prefix, nor one inside another', () => {
    const names = ['a.db', 'a.db2', 'sub/a.db', 'sub.db', 'sub/sub/a.db', 'x', 'x.db'];
    const root = tree(names);
    const { databases } = scanDirectory(root, {
      pattern: '*',
      recursive: true,
      locationOf: s3.locationOf,
    });
    const prefixes = databases.map((db) => `${db.location.prefix}/`);
    expect(new Set(prefixes).size).toBe(names.length);
    for (const a of prefixes)
      for (const b of prefixes)
        if (a !== b) expect(b.startsWith(a), `${b} inside ${a}`).toBe(false);
  });
});
