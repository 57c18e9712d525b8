/** A logger whose events tests read back (JSON lines, every level). */
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/logger.ts';
import { Redactor } from '../../src/redact.ts';

export function recordingLogger(): { logger: Logger; events: () => Record<string, unknown>[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      callback();
    },
  });
  const logger = createLogger({
    redactor: new Redactor([]),
    destination,
    format: 'json',
    level: 'trace',
  });
  return { logger, events: () => lines.map((line) => JSON.parse(line)) };
}
