import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { UsageError } from './cli/usage-error.ts';
import { createLogger, errorFields, LOG_LEVELS, parseLogLevel } from './logger.ts';
import { Redactor } from './redact.ts';

function capture(): { stream: Writable; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(chunk.toString('utf8'));
      callback();
    },
  });
  return { stream, lines };
}

describe('logger', () => {
  it('writes one JSON object per event with its fields', () => {
    const { stream, lines } = capture();
    const logger = createLogger({
      redactor: new Redactor([]),
      destination: stream,
      format: 'json',
    });
    logger.info({ event: 'segment-shipped', bytes: 10 });
    const parsed = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(parsed.event).toBe('segment-shipped');
    expect(parsed.bytes).toBe(10);
  });

  it('never writes a credential, in fields or in error causes', () => {
    const { stream, lines } = capture();
    const logger = createLogger({
      redactor: new Redactor(['canary-key-5150']),
      destination: stream,
      format: 'pretty',
    });
    const error = new Error('outer', { cause: new Error('denied for canary-key-5150') });
    logger.warn({ event: 'upload-failed', ...errorFields(error), note: 'AccountKey=abcd1234;' });
    expect(lines.join('')).not.toContain('canary-key-5150');
    expect(lines.join('')).not.toContain('abcd1234');
    expect(lines.join('')).toContain('upload-failed');
  });

  it('takes every level pino accepts, in any case, and refuses others naming them', () => {
    for (const level of LOG_LEVELS) {
      expect(parseLogLevel(level)).toBe(level);
      expect(parseLogLevel(level.toUpperCase())).toBe(level);
      const { stream } = capture();
      expect(createLogger({ redactor: new Redactor([]), destination: stream, level }).level).toBe(
        level,
      );
    }
    expect(LOG_LEVELS).toEqual(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);
    const refused = (() => {
      try {
        parseLogLevel('loud');
      } catch (error) {
        return error;
      }
    })();
    expect(refused).toBeInstanceOf(UsageError);
    expect((refused as Error).message).toBe(
      '--log-level must be one of trace, debug, info, warn, error, fatal, silent; got "loud"',
    );
  });

  it('refuses an unknown level with a usage error, not an error from inside pino', () => {
    const { stream } = capture();
    expect(() =>
      createLogger({ redactor: new Redactor([]), destination: stream, level: 'loud' }),
    ).toThrow(UsageError);
  });
});
