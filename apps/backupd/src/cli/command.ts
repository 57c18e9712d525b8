/**
 * What a command module is made of: the context it runs in, the usage error,
 * the option declarations (options.ts) and `defineCommand`, which binds one
 * module's name, options, help text and run function into a {@link Command}
 * main.ts can list. Command modules import this, never main.ts, so the CLI
 * has no import cycle.
 *
 * One declaration per option drives both parsing and `--help`; every command
 * also takes `-h, --help` and `--json` (a command without JSON output ignores
 * `--json`, as it always has).
 */
import type { Redactor } from '../redact.ts';
import {
  booleanOption,
  type OptionDeclaration,
  type OptionDeclarations,
  type OptionValues,
  optionHelpLines,
  parseOptionValues,
  readArguments,
} from './options.ts';

export {
  type BooleanOption,
  booleanOption,
  choiceOption,
  type ListOption,
  listOption,
  type OptionDeclaration,
  type OptionDeclarations,
  type OptionValues,
  type StringOption,
  stringOption,
} from './options.ts';
export { UsageError } from './usage-error.ts';

/** The process around a command; tests pass their own. */
export interface CommandIo {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly redactor: Redactor;
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean };
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean };
  readonly cwd: string;
}

/** What a command's run function receives: its arguments, typed by its declaration. */
export interface CommandContext<Values extends object = object> extends CommandIo {
  readonly positionals: readonly string[];
  readonly values: Values;
}

/** The declaration of a command with only the common options. */
export type NoOptions = Readonly<Record<never, OptionDeclaration>>;

/** The options every command takes. */
export const COMMON_OPTIONS = {
  help: booleanOption({ short: 'h' }),
  json: booleanOption(),
} as const;

type WithCommon<Options extends OptionDeclarations> = typeof COMMON_OPTIONS & Options;

/** The context of a command declaring `Options` (the common ones included). */
export type CommandContextFor<Options extends OptionDeclarations> = CommandContext<
  OptionValues<WithCommon<Options>>
>;

export interface CommandSpec<Options extends OptionDeclarations> {
  readonly name: string;
  /** The command and its arguments, as the main help lists it: `ls <url>`. */
  readonly synopsis: string;
  /** One line for the main help. */
  readonly summary: string;
  /** The `Usage:` lines; the first is printed after every usage error. */
  readonly usage: string;
  readonly description: string;
  readonly options: Options;
  /** Lines printed right under the options (replicate's environment variables). */
  readonly afterOptions?: string;
  /** Each a command line a shell passes as shown (operator-messages.test.ts runs them). */
  readonly examples: readonly string[];
  /** A last paragraph (the store URL forms). */
  readonly footer?: string;
  readonly run: (context: CommandContextFor<Options>) => Promise<number>;
}

/** A command main.ts can list: its help, and its arguments parsed into a run. */
export interface Command {
  readonly name: string;
  readonly synopsis: string;
  readonly summary: string;
  /** The whole `--help` text. */
  readonly help: string;
  /** The first line of {@link help}, printed after a usage error. */
  readonly usageLine: string;
  /**
   * Reads `args`: the help request, or the run. Option values are parsed
   * when the run starts, so `--help` wins over a bad value.
   * @throws TypeError (parseArgs) when an option is unknown or lacks its value.
   */
  parse(args: readonly string[]): { readonly help: true } | CommandRun;
}

export interface CommandRun {
  readonly help: false;
  /** @throws UsageError for an option value its declaration refuses, and whatever the command throws. */
  run(io: CommandIo): Promise<number>;
}

/** The parts of a command's declaration its `--help` is made of. */
export type HelpSpec = Pick<
  CommandSpec<OptionDeclarations>,
  'usage' | 'description' | 'options' | 'afterOptions' | 'examples' | 'footer'
>;

/** Usage, description, options (and what follows them), examples, footer: blank lines between. */
export function renderCommandHelp(spec: HelpSpec): string {
  const blocks = [spec.usage, spec.description];
  const options = optionHelpLines(spec.options);
  if (options.length > 0)
    blocks.push(
      ['Options:', ...options, ...(spec.afterOptions ? [spec.afterOptions] : [])].join('\n'),
    );
  blocks.push(['Examples:', ...spec.examples.map((line) => `  ${line}`)].join('\n'));
  if (spec.footer) blocks.push(spec.footer);
  return blocks.join('\n\n');
}

export function defineCommand<const Options extends OptionDeclarations>(
  spec: CommandSpec<Options>,
): Command {
  const declarations: WithCommon<Options> = { ...COMMON_OPTIONS, ...spec.options };
  const help = renderCommandHelp(spec);
  return {
    name: spec.name,
    synopsis: spec.synopsis,
    summary: spec.summary,
    help,
    usageLine: help.split('\n')[0] ?? '',
    parse(args) {
      const { positionals, raw } = readArguments(declarations, args);
      if (raw.help === true) return { help: true };
      return {
        help: false,
        run: async (io) =>
          spec.run({ ...io, positionals, values: parseOptionValues(declarations, raw) }),
      };
    },
  };
}
