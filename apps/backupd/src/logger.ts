/**
 * Structured logs: one JSON object per line (pino) with an `event` name and
 * key-value fields; on a terminal, one readable line per event instead.
 * Every line passes through the redactor before it is written, so a
 * credential that reaches a message or an error's text is still not printed.
 */
import { Writable } from 'node:stream';
import { type Logger, pino } from 'pino';
import { UsageError } from './cli/usage-error.ts';
import type { Redactor } from './redact.ts';

export type { Logger };

/** The log levels pino accepts, quietest last; `silent` writes nothing. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

function isLogLevel(text: string): text is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(text);
}

/**
 * A log level as given on the command line (any case). Checked before any
 * logger exists, so a typo is a usage error naming the valid levels rather
 * than an error from inside pino.
 * @throws UsageError when `value` is not one of {@link LOG_LEVELS}.
 */
export function parseLogLevel(value: string, option = '--log-level'): LogLevel {
  const level = value.trim().toLowerCase();
  if (isLogLevel(level)) return level;
  throw new UsageError(`${option} must be one of ${LOG_LEVELS.join(', ')}; got "${value}"`);
}

export interface LoggerOptions {
  /** One of {@link LOG_LEVELS} (any case); default `info`. Anything else throws UsageError. */
  readonly level?: string;
  /** `json` (default when not a terminal) or `pretty`. */
  readonly format?: 'json' | 'pretty';
  readonly redactor: Redactor;
  /** Where lines go; default standard error, keeping standard output for command results. */
  readonly destination?: NodeJS.WritableStream;
}

const LEVEL_NAMES: Record<number, string> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};

function prettyLine(line: string): string {
  try {
    const {
      level,
      time,
      msg,
      event,
      pid: _pid,
      hostname: _hostname,
      ...fields
    } = JSON.parse(line) as Record<string, unknown>;
    const clock = new Date(Number(time)).toISOString().slice(11, 23);
    const rest = Object.entries(fields)
      .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
      .join(' ');
    return `${clock} ${(LEVEL_NAMES[Number(level)] ?? String(level)).padEnd(5)} ${String(event ?? msg ?? '')}${rest ? ` ${rest}` : ''}\n`;
  } catch {
    return line;
  }
}

export function createLogger(options: LoggerOptions): Logger {
  const destination = options.destination ?? process.stderr;
  const pretty =
    (options.format ?? ((destination as { isTTY?: boolean }).isTTY ? 'pretty' : 'json')) ===
    'pretty';
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      const line = options.redactor.text(chunk.toString('utf8'));
      destination.write(pretty ? prettyLine(line) : line);
      callback();
    },
  });
  return pino(
    {
      level: options.level === undefined ? 'info' : parseLogLevel(options.level),
      base: { pid: process.pid },
      messageKey: 'msg',
      errorKey: 'error',
      formatters: { level: (_label, number) => ({ level: number }) },
    },
    sink,
  );
}

/** A plain object for logging an error: name, code, message, cause chain (redacted later with the line). */
export function errorFields(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { error: String(error) };
  const fields: Record<string, unknown> = { errorName: error.name, error: error.message };
  const code = (error as { code?: unknown }).code;
  if (code !== undefined) fields.errorCode = code;
  let cause = (error as { cause?: unknown }).cause;
  const causes: string[] = [];
  while (cause instanceof Error && causes.length < 5) {
    causes.push(`${cause.name}: ${cause.message}`);
    cause = (cause as { cause?: unknown }).cause;
  }
  if (causes.length > 0) fields.causes = causes;
  return fields;
}
