/**
 * replicate's configuration from its arguments: a config file (`-c`), or one
 * database and its URL with the environment's settings (config.ts). The
 * command line's `--listen` is taken over a file's `listen:`.
 */
import { readFileSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { UsageError } from '../cli/usage-error.ts';
import {
  type BackupdConfig,
  parseConfig,
  type SourceKind,
  singleDatabaseConfig,
} from '../config.ts';
import { commandLineUrl } from '../store-url.ts';

export interface ReplicateArguments {
  readonly positionals: readonly string[];
  /** `-c`: the config file, relative to `cwd`. */
  readonly config?: string;
  readonly type?: SourceKind;
  readonly listen?: string;
  readonly cwd: string;
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** The embedded default: a directory beside the database, `<db>-backups`. */
export function defaultBackupUrl(databasePath: string): string {
  return pathToFileURL(resolve(dirname(databasePath), `${basename(databasePath)}-backups`)).href;
}

/**
 * @throws UsageError for arguments that contradict each other or a file that cannot be read;
 * ConfigError (config.ts) for every problem in the settings, all at once.
 */
export function loadReplicateConfig(args: ReplicateArguments): BackupdConfig {
  const listen = args.listen ? { listen: args.listen } : {};
  if (args.config !== undefined) {
    if (args.positionals.length > 0)
      throw new UsageError('give either -c <config> or <db> [<url>], not both');
    const path = resolve(args.cwd, args.config);
    const config = parseConfig(readConfigFile(path), {
      env: args.env,
      baseDir: dirname(path),
      source: path,
    });
    return { ...config, ...listen };
  }
  const [database, url, extra] = args.positionals;
  if (database === undefined) throw new UsageError('missing <db> (or -c <config>)');
  if (extra !== undefined) throw new UsageError(`unexpected argument "${extra}"`);
  const absolute = resolve(args.cwd, database);
  return singleDatabaseConfig(
    {
      path: absolute,
      url: url === undefined ? defaultBackupUrl(absolute) : commandLineUrl(url, args.cwd),
      ...(args.type ? { type: args.type } : {}),
    },
    { env: args.env, baseDir: args.cwd, ...listen },
  );
}

function readConfigFile(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    const code = error instanceof Error && 'code' in error ? error.code : undefined;
    throw new UsageError(
      `cannot read the config file ${path}: ${typeof code === 'string' ? code : String(error instanceof Error ? error.message : error)}`,
    );
  }
}
