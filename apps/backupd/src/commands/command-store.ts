/** What several commands share: opening the URL argument, printing JSON or text. */
import { type CommandContext, UsageError } from '../cli/command.ts';
import { type OpenedStore, openStore } from '../open-store.ts';
import { commandLineUrl, parseStoreUrl } from '../store-url.ts';

export async function openUrlArgument(
  context: CommandContext,
  position: number,
  what = '<url>',
): Promise<OpenedStore & { url: string }> {
  const given = context.positionals[position];
  if (given === undefined) throw new UsageError(`missing ${what}`);
  const url = commandLineUrl(given, context.cwd);
  const opened = await openStore(parseStoreUrl(url), context.env);
  return { ...opened, url };
}

export function expectPositionals(context: CommandContext, count: number): void {
  if (context.positionals.length > count) {
    throw new UsageError(`unexpected argument "${context.positionals[count]}"`);
  }
}

export function printJson(context: CommandContext, value: unknown): void {
  context.stdout.write(context.redactor.text(`${JSON.stringify(value, null, 2)}\n`));
}

export function print(context: CommandContext, text: string): void {
  context.stdout.write(context.redactor.text(`${text}\n`));
}

/** Formats rows as aligned columns. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, column) => cell.padEnd(widths[column] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}
