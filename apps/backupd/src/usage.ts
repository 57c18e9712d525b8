/** Help texts, one per command, each with examples. */

export const VERSION = '0.1.0';

export const COMMANDS = ['replicate', 'restore', 'ls', 'verify', 'lease', 'check'] as const;
export type CommandName = (typeof COMMANDS)[number];

const URL_HELP = `Store URLs:
  s3://bucket/prefix[?endpoint=URL&region=R&forcePathStyle=true]   S3, R2, MinIO, …
  az://container/prefix[?account=NAME&endpoint=URL]                Azure Blob Storage
  gs://bucket/prefix[?endpoint=URL&project=ID]                     Google Cloud Storage
  file:///absolute/dir                                             a local directory
Credentials come from the environment or the SDK's standard chain, never from the URL:
  S3: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_PROFILE / instance roles
  Azure: AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT + AZURE_STORAGE_KEY, or AZURE_STORAGE_SAS_TOKEN
  GCS: GOOGLE_APPLICATION_CREDENTIALS or the metadata server`;

export const MAIN_HELP = `backupd ${VERSION} — continuous, fenced backup of a database's WAL to object storage

Usage: backupd <command> [options]

Commands:
  replicate <db> [<url>]    back up a database continuously (default: a directory beside it)
  restore <url> <target>    restore a database from a backup
  ls <url>                  list restore points
  verify <url> [--deep]     check every restore point and the objects it names
  lease <url>               show who holds the backup lease
  check <url>               test whether a bucket gives real single-writer exclusion

Run 'backupd <command> --help' for a command's options and examples.
Options: --version, --help

${URL_HELP}`;

export const COMMAND_HELP: Record<CommandName, string> = {
  replicate: `Usage: backupd replicate <db> [<url>] [options]
       backupd replicate -c <config.yml> [options]

Backs up <db> continuously. Without <url>, backups go to the directory
<db>-backups/ beside it (a local store: no cloud account needed).

Options:
  -c, --config <file>      a YAML config with several databases
  --type <sqlite|framed>   what <db> is (default sqlite; framed = a framed store directory)
  --exec "<command>"       run the application as a child; forward signals; exit with its code
  --restore-if-missing     restore <db> from <url> first when it does not exist, then continue that backup
  --listen <host:port>     serve /healthz, /livez, /readyz, /metrics and a status page (off by default)
  --log-format <json|pretty>
  --log-level <level>      trace, debug, info (default), warn, error, fatal or silent
Environment (durations with a unit: 500ms, 5s, 2m, 1h):
  BACKUPD_INTERVAL, BACKUPD_RESTORE_POINT_INTERVAL, BACKUPD_RETENTION, BACKUPD_LEASE_TTL, BACKUPD_SHUTDOWN_GRACE,
  BACKUPD_CHECKPOINT_PASSIVE_PAGES, BACKUPD_CHECKPOINT_TRUNCATE_PAGES, BACKUPD_CONDITIONAL=off

Examples:
  backupd replicate ./app.db
  backupd replicate ./app.db s3://my-bucket/app --listen 127.0.0.1:9090
  backupd replicate -c /etc/backupd.yml
  backupd replicate ./app.db s3://my-bucket/app --restore-if-missing --exec "node server.js"

${URL_HELP}`,
  restore: `Usage: backupd restore <url> <target> [--commit N | --time T | --manifest KEY] [--if-missing] [--force]

Restores the newest restore point (or the one chosen) to <target>. Every object
is checked (size and CRC-32) before it is used; files are written atomically.

Options:
  --commit <N>        restore exactly to commit N
  --time <T>          restore the newest commit at or before T (RFC 3339 with Z or an offset, e.g. 2026-11-29T08:00:00Z)
  --manifest <KEY>    restore the restore point stored at KEY
  --if-missing        do nothing (exit 0) when <target> already exists
  --force             overwrite an existing <target>
  --type <sqlite|framed>  what to restore (default sqlite)

Examples:
  backupd restore s3://my-bucket/app ./restored.db
  backupd restore s3://my-bucket/app ./restored.db --commit 1234
  backupd restore file:///backups/app ./app.db --if-missing`,
  ls: `Usage: backupd ls <url> [--json]

Lists restore points: commit, time, size, generation, lineage, and which one LATEST names.

Examples:
  backupd ls s3://my-bucket/app
  backupd ls file:///srv/app.db-backups --json`,
  verify: `Usage: backupd verify <url> [--deep] [--json]

Checks every restore point: the manifest parses, its lineage is consistent,
and every object it names exists with the right size (and CRC-32 with --deep).
Exit code 0 when everything verified, 1 otherwise.

Examples:
  backupd verify s3://my-bucket/app
  backupd verify s3://my-bucket/app --deep`,
  lease: `Usage: backupd lease <url> [--json]

Shows who holds the backup lease on <url>, since when, how long until another
instance may take it over, and whether the service gives real exclusion.

Examples:
  backupd lease s3://my-bucket/app`,
  check: `Usage: backupd check <url> [--json]

Runs the conditional-write probe and the conformance cases against the live
bucket, under a scratch prefix it deletes afterwards, and says whether this
service gives real single-writer exclusion. Exit code 0 when it does.

Examples:
  backupd check 's3://my-bucket/scratch?endpoint=https://ACCOUNT.r2.cloudflarestorage.com&region=auto'
  backupd check az://backups/scratch`,
};
