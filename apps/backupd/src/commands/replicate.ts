/**
 * `backupd replicate`: the daemon. Starts one worker per database and replica,
 * optionally the status listener and the application (`--exec`), and runs
 * until a signal or the application stops it (replicate/signals.ts): the
 * first SIGTERM or SIGINT stops gracefully (each worker flushes what is
 * durable, writes a final restore point and releases its lease, within its
 * shutdown grace), a second exits at once (code 130).
 *
 * The steps live in replicate/: the configuration from the arguments, the
 * first-boot restore, starting, supervising and stopping.
 */
import {
  booleanOption,
  type CommandContextFor,
  choiceOption,
  defineCommand,
  stringOption,
} from '../cli/command.ts';
import { STORE_URL_HELP } from '../cli/store-url-help.ts';
import { DATABASE_SETTINGS, environmentVariable } from '../config.ts';
import { createLogger, parseLogLevel } from '../logger.ts';
import { startApplication } from '../replicate/application.ts';
import { loadReplicateConfig } from '../replicate/config-arguments.ts';
import { restoreMissingDatabases } from '../replicate/first-boot-restore.ts';
import { stopReplication } from '../replicate/shutdown.ts';
import { superviseUntilStopped } from '../replicate/signals.ts';
import { announceBackups, lowerCpuPriority, startReplication } from '../replicate/start.ts';

export { defaultBackupUrl } from '../replicate/config-arguments.ts';

const options = {
  config: stringOption({
    short: 'c',
    argument: '<file>',
    description: 'a YAML config with several databases',
  }),
  type: choiceOption(['sqlite', 'framed'], {
    description: 'what <db> is (default sqlite; framed = a framed store directory)',
  }),
  exec: stringOption({
    argument: '"<command>"',
    description: 'run the application as a child; forward signals; exit with its code',
  }),
  'restore-if-missing': booleanOption({
    description: 'restore <db> from <url> first when it does not exist, then continue that backup',
  }),
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

export const replicateCommand = defineCommand({
  name: 'replicate',
  synopsis: 'replicate <db> [<url>]',
  summary: 'back up a database continuously (default: a directory beside it)',
  usage: `Usage: backupd replicate <db> [<url>] [options]
       backupd replicate -c <config.yml> [options]`,
  description: `Backs up <db> continuously. Without <url>, backups go to the directory
<db>-backups/ beside it (a local store: no cloud account needed).`,
  options,
  afterOptions: environmentHelp(),
  examples: [
    'backupd replicate ./app.db',
    'backupd replicate ./app.db s3://my-bucket/app --listen 127.0.0.1:9090',
    'backupd replicate -c /etc/backupd.yml',
    'backupd replicate ./app.db s3://my-bucket/app --restore-if-missing --exec "node server.js"',
  ],
  footer: STORE_URL_HELP,
  run: replicate,
});

/** The one-database mode's variables, as many to a line as fit in 120 columns. */
function environmentHelp(): string {
  const lines = ['Environment (durations with a unit: 500ms, 5s, 2m, 1h):'];
  let line = '';
  for (const setting of DATABASE_SETTINGS) {
    const name = `${environmentVariable(setting.key)}${setting.reading === 'switch' ? '=off' : ''}`;
    if (line !== '' && `${line}, ${name}`.length > 120) {
      lines.push(`${line},`);
      line = '';
    }
    line = line === '' ? `  ${name}` : `${line}, ${name}`;
  }
  return [...lines, line].join('\n');
}

async function replicate(context: CommandContextFor<typeof options>): Promise<number> {
  const { values } = context;
  const config = loadReplicateConfig({
    positionals: context.positionals,
    config: values.config,
    type: values.type,
    listen: values.listen,
    cwd: context.cwd,
    env: context.env,
  });
  const logger = createLogger({
    redactor: context.redactor,
    destination: context.stderr,
    ...(values['log-format'] ? { format: values['log-format'] } : {}),
    ...(values['log-level'] ? { level: values['log-level'] } : {}),
  });
  announceBackups(config, context);
  if (values['restore-if-missing'])
    await restoreMissingDatabases(config, { env: context.env, logger });
  const replication = await startReplication(config, { ...context, logger });
  // The workers' timers do not keep the process alive by themselves; the
  // daemon runs until a signal (or the application) stops it.
  const keepAlive = setInterval(() => {}, 1 << 30);
  try {
    const application = values.exec !== undefined ? startApplication(values.exec) : undefined;
    // Only now, so the application started above keeps its own priority.
    lowerCpuPriority(config, logger);
    return await superviseUntilStopped({
      logger,
      signals: process,
      ...(application ? { application } : {}),
      stop: (code) => stopReplication(replication, logger, code),
      exit: (code) => process.exit(code),
    });
  } finally {
    clearInterval(keepAlive);
  }
}
