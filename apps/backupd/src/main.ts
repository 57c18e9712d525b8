/**
 * The command-line entry: the table of commands, and the dispatch to one of
 * them. Parses the command line, runs the command, and returns the exit code
 * (see exit-codes.ts). Errors are printed as one line naming what was wrong,
 * passed through the redactor; a stack trace only with BACKUPD_DEBUG=1.
 *
 * Each command is a module (commands/*.ts) that declares its options, help
 * and run function (cli/command.ts); nothing imports this module but the
 * binary and tests.
 */
import type { Command, CommandIo } from './cli/command.ts';
import { UsageError } from './cli/usage-error.ts';
import { checkCommand } from './commands/check-command.ts';
import { followCommand } from './commands/follow-command.ts';
import { leaseCommand } from './commands/lease-command.ts';
import { lsCommand } from './commands/ls-command.ts';
import { replicateCommand } from './commands/replicate-command.ts';
import { restoreCommand } from './commands/restore-command.ts';
import { verifyCommand } from './commands/verify-command.ts';
import { ConfigError } from './config.ts';
import { EXIT_FAILED, EXIT_OK, EXIT_USAGE } from './exit-codes.ts';
import { renderMainHelp } from './main-help.ts';
import { Redactor } from './redact.ts';
import { StoreUrlError } from './store-url.ts';
import { VERSION } from './version.ts';

/** Every command, in the order the main help lists them. */
export const COMMANDS: readonly Command[] = [
  replicateCommand,
  restoreCommand,
  followCommand,
  lsCommand,
  verifyCommand,
  leaseCommand,
  checkCommand,
];

export const MAIN_HELP = renderMainHelp(VERSION, COMMANDS);

export async function main(
  argv: readonly string[],
  io: Partial<Pick<CommandIo, 'env' | 'stdout' | 'stderr' | 'cwd'>> = {},
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
  const command = COMMANDS.find((candidate) => candidate.name === first);
  if (command === undefined) {
    const names = COMMANDS.map((candidate) => candidate.name).join(', ');
    stderr.write(`backupd: unknown command "${first}" (commands: ${names}; see backupd --help)\n`);
    return EXIT_USAGE;
  }
  let parsed: ReturnType<Command['parse']>;
  try {
    parsed = command.parse(rest);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    stderr.write(redactor.text(`backupd ${command.name}: ${message}\n${command.usageLine}\n`));
    return EXIT_USAGE;
  }
  if (parsed.help) {
    stdout.write(`${command.help}\n`);
    return EXIT_OK;
  }
  try {
    return await parsed.run({ env, redactor, stdout, stderr, cwd: io.cwd ?? process.cwd() });
  } catch (error) {
    const usage =
      error instanceof UsageError || error instanceof ConfigError || error instanceof StoreUrlError;
    const message = error instanceof Error ? error.message : String(error);
    stderr.write(redactor.text(`backupd ${command.name}: ${message}\n`));
    if (usage) stderr.write(`${command.usageLine}\n`);
    if (env.BACKUPD_DEBUG === '1' && error instanceof Error && error.stack)
      stderr.write(redactor.text(`${error.stack}\n`));
    return usage ? EXIT_USAGE : EXIT_FAILED;
  }
}
