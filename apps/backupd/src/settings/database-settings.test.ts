import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { DATABASE_SETTINGS, type PackageConstants } from './database-settings.ts';
import { OTHER_SETTINGS } from './other-settings.ts';

/** The package's export of each constant a row names. */
async function exported(constants: PackageConstants): Promise<[string, unknown, unknown][]> {
  const module = (await import(constants.package)) as Record<string, unknown>;
  return Object.entries(constants.values).map(([name, value]) => [name, value, module[name]]);
}

const isObject = (value: unknown): value is object =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

describe('the rows', () => {
  it('name constants their package exports, each the default or a bound', async () => {
    for (const setting of [...DATABASE_SETTINGS, ...OTHER_SETTINGS]) {
      if (setting.constants === undefined) continue;
      for (const [name, value, actual] of await exported(setting.constants))
        expect(actual, `${setting.constants.package} ${name}`).toEqual(value);
    }
    for (const setting of DATABASE_SETTINGS) {
      // A default may hold its constant (`retention`: `{ windowMs: DEFAULT_RETAIN_FOR_MS }`).
      const { default: value, value: kind } = setting;
      const used = [
        value,
        ...Object.values(isObject(value) ? value : {}),
        ...Object.values(kind.bounds ?? {}),
      ];
      for (const [name, value] of Object.entries(setting.constants?.values ?? {}))
        expect(used, `${setting.key}: ${name}`).toContainEqual(value);
    }
  });

  it('write each default as YAML that reads back as the default', () => {
    for (const setting of DATABASE_SETTINGS) {
      const problems: string[] = [];
      const yaml = parseYaml(setting.value.show(setting.default));
      expect(setting.value.parse(yaml, setting.key, problems), setting.key).toEqual(
        setting.default,
      );
      expect(problems).toEqual([]);
    }
  });

  it('each have a help line and a worker option, and a key of their own', () => {
    for (const setting of DATABASE_SETTINGS) {
      expect(setting.help, setting.key).not.toMatch(/\n/);
      expect(setting.workerOption.options.length, setting.key).toBeGreaterThan(0);
    }
    const keys = [...DATABASE_SETTINGS.map((s) => s.key), ...OTHER_SETTINGS.flatMap((s) => s.keys)];
    expect(new Set(keys).size).toBe(keys.length);
  });
});
