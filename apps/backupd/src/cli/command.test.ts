import { Writable } from 'node:stream';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { Redactor } from '../redact.ts';
import {
  booleanOption,
  type CommandContextFor,
  type CommandIo,
  choiceOption,
  defineCommand,
  renderCommandHelp,
  stringOption,
  UsageError,
} from './command.ts';
import { optionHelpLines, parseOptionValues, readArguments } from './options.ts';

const io: CommandIo = {
  env: {},
  redactor: new Redactor([]),
  stdout: new Writable({ write: (_chunk, _encoding, callback) => callback() }),
  stderr: new Writable({ write: (_chunk, _encoding, callback) => callback() }),
  cwd: '/',
};

const options = {
  config: stringOption({ short: 'c', argument: '<file>', description: 'a config file' }),
  count: stringOption({ argument: '<N>', description: 'how many', parse: (text) => Number(text) }),
  format: choiceOption(['json', 'pretty'], { description: '' }),
  deep: booleanOption({ description: 'look deeper' }),
  quiet: booleanOption(),
} as const;

describe('an option declaration', () => {
  it('drives parsing: strings as given, through parse, choices, booleans, positionals', () => {
    const { positionals, raw } = readArguments(options, [
      'a',
      '-c',
      'x.yml',
      '--count',
      '7',
      '--format',
      'json',
      '--deep',
      'b',
    ]);
    expect(positionals).toEqual(['a', 'b']);
    expect(parseOptionValues(options, raw)).toEqual({
      config: 'x.yml',
      count: 7,
      format: 'json',
      deep: true,
    });
  });

  it('types each value by its declaration', () => {
    const values = parseOptionValues(options, {});
    expectTypeOf(values.config).toEqualTypeOf<string | undefined>();
    expectTypeOf(values.count).toEqualTypeOf<number | undefined>();
    expectTypeOf(values.format).toEqualTypeOf<'json' | 'pretty' | undefined>();
    expectTypeOf(values.deep).toEqualTypeOf<boolean | undefined>();
    expect(values).toEqual({});
  });

  it('refuses an undeclared option and a string option without its value (parseArgs, strict)', () => {
    expect(() => readArguments(options, ['--nope'])).toThrow(/Unknown option '--nope'/);
    expect(() => readArguments(options, ['--config'])).toThrow(/--config/);
  });

  it('refuses a choice outside its list, naming the option and the choices', () => {
    const { raw } = readArguments(options, ['--format', 'yaml']);
    expect(() => parseOptionValues(options, raw)).toThrow(UsageError);
    expect(() => parseOptionValues(options, raw)).toThrow(
      '--format must be json or pretty, got "yaml"',
    );
    const three = { level: choiceOption(['low', 'mid', 'high']) };
    expect(() => parseOptionValues(three, { level: 'max' })).toThrow(
      '--level must be low, mid or high, got "max"',
    );
  });

  it('drives --help: listed options aligned, a bare one alone, unlisted ones left out', () => {
    expect(optionHelpLines(options)).toEqual([
      '  -c, --config <file>  a config file',
      '  --count <N>          how many',
      '  --format <json|pretty>',
      '  --deep               look deeper',
    ]);
  });
});

describe('defineCommand', () => {
  const seen: unknown[] = [];
  const command = defineCommand({
    name: 'demo',
    synopsis: 'demo <thing>',
    summary: 'a demonstration',
    usage: 'Usage: backupd demo <thing>',
    description: 'Does a demonstration.',
    options,
    afterOptions: 'Environment: NONE',
    examples: ['backupd demo x', 'backupd demo y --deep'],
    footer: 'Footer.',
    run: async (context) => {
      expectTypeOf(context).toEqualTypeOf<CommandContextFor<typeof options>>();
      expectTypeOf(context.values.json).toEqualTypeOf<boolean | undefined>();
      seen.push(context.positionals, context.values);
      return 5;
    },
  });

  it('renders its help from the declaration', () => {
    expect(command.help).toBe(
      [
        'Usage: backupd demo <thing>',
        '',
        'Does a demonstration.',
        '',
        'Options:',
        ...optionHelpLines(options),
        'Environment: NONE',
        '',
        'Examples:',
        '  backupd demo x',
        '  backupd demo y --deep',
        '',
        'Footer.',
      ].join('\n'),
    );
    expect(command.usageLine).toBe('Usage: backupd demo <thing>');
    expect(renderCommandHelp({ usage: 'U', description: 'D', options: {}, examples: ['e'] })).toBe(
      'U\n\nD\n\nExamples:\n  e',
    );
  });

  it('runs with typed values, the common --json included', async () => {
    const parsed = command.parse(['thing', '--count', '3', '--json']);
    expect(parsed.help).toBe(false);
    if (parsed.help) return;
    expect(await parsed.run(io)).toBe(5);
    expect(seen).toEqual([['thing'], { count: 3, json: true }]);
  });

  it('answers --help (and -h) before any value is parsed', () => {
    expect(command.parse(['--format', 'yaml', '--help'])).toEqual({ help: true });
    expect(command.parse(['-h'])).toEqual({ help: true });
  });

  it('parses values when the run starts: a bad one is a UsageError from run', async () => {
    const parsed = command.parse(['--format', 'yaml']);
    if (parsed.help) throw new Error('not a help request');
    await expect(parsed.run(io)).rejects.toThrow(UsageError);
  });
});
