/** The options of the long-running commands (`replicate`, `follow`): the status listener and the logs. */
import { parseLogLevel } from '../logger.ts';
import { choiceOption, stringOption } from './options.ts';

export const DAEMON_OPTIONS = {
  listen: stringOption({
    argument: '<host:port>',
    description: 'serve /healthz, /livez, /readyz, /metrics and a status page (off by default)',
  }),
  'log-format': choiceOption(['json', 'pretty'], { description: '' }),
  'log-level': stringOption({
    argument: '<level>',
    description: 'trace, debug, info (default), warn, error, fatal or silent',
    parse: parseLogLevel,
  }),
} as const;
