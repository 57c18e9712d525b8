/**
 * One declaration per command-line option, driving both parsing (node:util
 * `parseArgs`, strict) and the option's line in `--help`. A string option
 * carries its own `parse`, so a command receives typed values (a choice as
 * its union, `--commit` as a number) and never checks or casts them.
 *
 * Parsing happens in two steps, in this order: `readArguments` (the shape:
 * unknown options, a missing value; throws parseArgs' own TypeError), then,
 * unless `--help` was asked for, `parseOptionValues` (each value; throws
 * UsageError naming the option and what it accepts).
 */
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import { UsageError } from './usage-error.ts';

interface OptionHelp {
  /** A one-letter alias, `-c`. */
  readonly short?: string;
  /**
   * The text after the option in `--help`; `''` lists the option alone;
   * absent: not listed (the common `--help` and `--json`, named in usage lines).
   */
  readonly description?: string;
}

export interface BooleanOption extends OptionHelp {
  readonly type: 'boolean';
}

export interface StringOption<Value> extends OptionHelp {
  readonly type: 'string';
  /** The value's placeholder in `--help`: `<file>`, `"<command>"`. */
  readonly argument: string;
  /** Turns the text into the value the command receives. @throws UsageError naming `flag`. */
  readonly parse: (text: string, flag: string) => Value;
}

/** A string option that may be given several times: the command receives every value, in order. */
export interface ListOption<Value> extends StringOption<Value> {
  readonly multiple: true;
}

export type OptionDeclaration = BooleanOption | StringOption<unknown> | ListOption<unknown>;
export type OptionDeclarations = Readonly<Record<string, OptionDeclaration>>;

/** What a command receives: each declared option's parsed value, absent when not given. */
export type OptionValues<Options extends OptionDeclarations> = {
  readonly [Name in keyof Options]?: Options[Name] extends ListOption<infer Value>
    ? readonly Value[]
    : Options[Name] extends StringOption<infer Value>
      ? Value
      : boolean;
};

export function booleanOption(help: OptionHelp = {}): BooleanOption {
  return { type: 'boolean', ...help };
}

type StringOptionSpec = OptionHelp & { readonly argument: string };

/** A string option, through `parse`, or as given. (The `parse` overload first, so `parse`'s parameters are typed from it.) */
export function stringOption<Value>(
  spec: StringOptionSpec & { readonly parse: (text: string, flag: string) => Value },
): StringOption<Value>;
export function stringOption(spec: StringOptionSpec): StringOption<string>;
export function stringOption<Value>(
  spec: StringOptionSpec & { readonly parse?: (text: string, flag: string) => Value },
): StringOption<Value | string> {
  return { type: 'string', ...spec, parse: spec.parse ?? ((text) => text) };
}

/** A string option that may be repeated, each value through `parse` (or as given). */
export function listOption<Value>(
  spec: StringOptionSpec & { readonly parse: (text: string, flag: string) => Value },
): ListOption<Value>;
export function listOption(spec: StringOptionSpec): ListOption<string>;
export function listOption<Value>(
  spec: StringOptionSpec & { readonly parse?: (text: string, flag: string) => Value },
): ListOption<Value | string> {
  return { type: 'string', ...spec, parse: spec.parse ?? ((text) => text), multiple: true };
}

/** `a`, `a or b`, `a, b or c`. */
function alternatives(choices: readonly string[]): string {
  return choices.length < 2
    ? choices.join('')
    : `${choices.slice(0, -1).join(', ')} or ${choices[choices.length - 1]}`;
}

/** A string option that takes one of `choices`, exactly as written. */
export function choiceOption<const Choice extends string>(
  choices: readonly Choice[],
  help: OptionHelp & { readonly argument?: string } = {},
): StringOption<Choice> {
  const isChoice = (text: string): text is Choice => (choices as readonly string[]).includes(text);
  return {
    type: 'string',
    argument: `<${choices.join('|')}>`,
    ...help,
    parse: (text, flag) => {
      if (isChoice(text)) return text;
      throw new UsageError(`${flag} must be ${alternatives(choices)}, got "${text}"`);
    },
  };
}

export interface ReadArguments {
  readonly positionals: readonly string[];
  /** The options as parseArgs read them, before `parse`; a list option's as a list. */
  readonly raw: Readonly<Record<string, string | readonly string[] | boolean | undefined>>;
}

/**
 * The shape of the command line, strictly: every option declared, every
 * string option with a value.
 * @throws TypeError (parseArgs' `ERR_PARSE_ARGS_*`) naming the argument.
 */
export function readArguments(
  declarations: OptionDeclarations,
  args: readonly string[],
): ReadArguments {
  const options: ParseArgsOptionsConfig = {};
  for (const [name, declaration] of Object.entries(declarations))
    options[name] = {
      type: declaration.type,
      ...(declaration.short ? { short: declaration.short } : {}),
      ...(isList(declaration) ? { multiple: true } : {}),
    };
  const parsed = parseArgs({ args: [...args], options, allowPositionals: true, strict: true });
  const raw: Record<string, string | readonly string[] | boolean | undefined> = {};
  // Lists come only from list options (`multiple: true`), and hold strings only.
  for (const [name, value] of Object.entries(parsed.values))
    if (typeof value === 'string' || typeof value === 'boolean') raw[name] = value;
    else if (Array.isArray(value)) raw[name] = value.filter((item) => typeof item === 'string');
  return { positionals: parsed.positionals, raw };
}

/**
 * Each given option through its declaration's `parse`.
 * @throws UsageError from the first value its option refuses.
 */
export function parseOptionValues<Options extends OptionDeclarations>(
  declarations: Options,
  raw: ReadArguments['raw'],
): OptionValues<Options> {
  const values: Record<string, unknown> = {};
  for (const [name, declaration] of Object.entries(declarations)) {
    const value = raw[name];
    if (value === undefined) continue;
    const flag = `--${name}`;
    if (declaration.type === 'boolean') values[name] = value;
    else if (typeof value === 'string') values[name] = declaration.parse(value, flag);
    else if (Array.isArray(value))
      values[name] = value.map((text: string) => declaration.parse(text, flag));
  }
  // Each declared option got the type its declaration names (the loop above).
  return values as OptionValues<Options>;
}

function isList(declaration: OptionDeclaration): declaration is ListOption<unknown> {
  return 'multiple' in declaration && declaration.multiple === true;
}

/** The `Options:` lines of `--help`, descriptions aligned two spaces past the longest option. */
export function optionHelpLines(declarations: OptionDeclarations): string[] {
  const listed = Object.entries(declarations).flatMap(([name, declaration]) =>
    declaration.description === undefined
      ? []
      : [
          {
            flag: `${declaration.short ? `-${declaration.short}, ` : ''}--${name}${
              declaration.type === 'string' ? ` ${declaration.argument}` : ''
            }`,
            description: declaration.description,
          },
        ],
  );
  const width = Math.max(
    0,
    ...listed.filter((entry) => entry.description !== '').map((entry) => entry.flag.length),
  );
  return listed.map(({ flag, description }) =>
    description === '' ? `  ${flag}` : `  ${flag.padEnd(width + 2)}${description}`,
  );
}
