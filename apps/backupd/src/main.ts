/**
 * The command-line entry: parses the command and its options, runs it, and
 * returns the exit code (see exit-codes.ts). Errors are printed as one line
 * naming what was wrong, passed through the redactor; a stack trace only with
 * BACKUPD_DEBUG=1.
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { ConfigError } from './config.ts';
import { EXIT_FAILED, EXIT_OK, EXIT_USAGE } from './exit-codes.ts';
import { Redactor } from './redact.ts';
import { StoreUrlError } from './store-url.ts';
import { COMMAND_HELP, COMMANDS, type CommandName, MAIN_HELP, VERSION } from './usage.ts';

export interface CommandContext {
  readonly positionals: readonly string[];
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly redactor: Redactor;
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean };
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean };
  readonly cwd: string;
}

/** A usage error: wrong arguments. Printed with the command's usage line. */
export class UsageError extends Error {
  readonly code = 'USAGE';
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The log levels pino accepts, quietest last; `silent` writes nothing. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * A log level as given on the command line (any case). Checked before any
 * logger exists, so a typo is a usage error naming the valid levels rather
 * than an error from inside pino.
 * @throws UsageError when `value` is not one of {@link LOG_LEVELS}.
 */
export function parseLogLevel(value: string, option = '--log-level'): LogLevel {
  const level = value.trim().toLowerCase();
  if ((LOG_LEVELS as readonly string[]).includes(level)) return level as LogLevel;
  throw new UsageError(`${option} must be one of ${LOG_LEVELS.join(', ')}; got "${value}"`);
}

const COMMON = { help: { type: 'boolean', short: 'h' }, json: { type: 'boolean' } } as const;

const OPTIONS: Record<CommandName, NonNullable<ParseArgsConfig['options']>> = {
  replicate: {
    ...COMMON,
    config: { type: 'string', short: 'c' },
    type: { type: 'string' },
    exec: { type: 'string' },
    'restore-if-missing': { type: 'boolean' },
    listen: { type: 'string' },
    'log-format': { type: 'string' },
    'log-level': { type: 'string' },
  },
  restore: {
    ...COMMON,
    commit: { type: 'string' },
    time: { type: 'string' },
    manifest: { type: 'string' },
    'if-missing': { type: 'boolean' },
    force: { type: 'boolean' },
    type: { type: 'string' },
  },
  ls: { ...COMMON },
  verify: { ...COMMON, deep: { type: 'boolean' } },
  lease: { ...COMMON },
  check: { ...COMMON },
};

type Handler = (context: CommandContext) => Promise<number>;

async function loadHandler(command: CommandName): Promise<Handler> {
  switch (command) {
    case 'replicate':
      return (await import('./commands/replicate.ts')).replicateCommand;
    case 'restore':
      return (await import('./commands/restore.ts')).restoreCommand;
    case 'ls':
      return (await import('./commands/ls.ts')).lsCommand;
    case 'verify':
      return (await import('./commands/verify.ts')).verifyCommand;
    case 'lease':
      return (await import('./commands/lease.ts')).leaseCommand;
    case 'check':
      return (await import('./commands/check.ts')).checkCommand;
  }
}

export async function main(
  argv: readonly string[],
  io: Partial<Pick<CommandContext, 'env' | 'stdout' | 'stderr' | 'cwd'>> = {},
): Promise<number> {
  const env = io.env ?? process.env;
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  const redactor = Redactor.fromEnvironment(env);
  const [first, ...rest] = argv;
  if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
    stdout.write(`${MAIN_HELP}\n`);
    return first === undefined ? EXIT_USAGE : EXIT_OK;
  }
  if (first === '--version' || first === '-v') {
    stdout.write(`backupd ${VERSION}\n`);
    return EXIT_OK;
  }
  if (!(COMMANDS as readonly string[]).includes(first)) {
    stderr.write(
      `backupd: unknown command "${first}" (commands: ${COMMANDS.join(', ')}; see backupd --help)\n`,
    );
    return EXIT_USAGE;
  }
  const command = first as CommandName;
  let parsed: { values: Record<string, string | boolean | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({
      args: [...rest],
      options: OPTIONS[command],
      allowPositionals: true,
      strict: true,
    }) as typeof parsed;
  } catch (error) {
    stderr.write(
      `backupd ${command}: ${(error as Error).message}\n${COMMAND_HELP[command].split('\n')[0]}\n`,
    );
    return EXIT_USAGE;
  }
  if (parsed.values.help) {
    stdout.write(`${COMMAND_HELP[command]}\n`);
    return EXIT_OK;
  }
  const context: CommandContext = {
    positionals: parsed.positionals,
    values: parsed.values,
    env,
    redactor,
    stdout,
    stderr,
    cwd: io.cwd ?? process.cwd(),
  };
  try {
    // Checked here, before any command builds its logger from it.
    const logLevel = parsed.values['log-level'];
    if (typeof logLevel === 'string') parsed.values['log-level'] = parseLogLevel(logLevel);
    const handler = await loadHandler(command);
    return await handler(context);
  } catch (error) {
    const usage =
      error instanceof UsageError || error instanceof ConfigError || error instanceof StoreUrlError;
    const message = error instanceof Error ? error.message : String(error);
    stderr.write(redactor.text(`backupd ${command}: ${message}\n`));
    if (usage) stderr.write(`${COMMAND_HELP[command].split('\n')[0]}\n`);
    if (env.BACKUPD_DEBUG === '1' && error instanceof Error && error.stack)
      stderr.write(redactor.text(`${error.stack}\n`));
    return usage ? EXIT_USAGE : EXIT_FAILED;
  }
}
