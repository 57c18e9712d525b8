/** The main help (`backupd --help`): the version, one line per command, the store URL forms. */
import type { Command } from './cli/command.ts';
import { STORE_URL_HELP } from './cli/store-url-help.ts';

export function renderMainHelp(version: string, commands: readonly Command[]): string {
  const width = Math.max(...commands.map((command) => command.synopsis.length)) + 4;
  const lines = commands.map((command) => `  ${command.synopsis.padEnd(width)}${command.summary}`);
  return `backupd ${version} — continuous, fenced backup of a database's WAL to object storage

Usage: backupd <command> [options]

Commands:
${lines.join('\n')}

Run 'backupd <command> --help' for a command's options and examples.
Options: --version, --help

${STORE_URL_HELP}`;
}
