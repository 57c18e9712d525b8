#!/bin/sh
# A container entrypoint for an application that keeps its data in one SQLite
# database, backed up by backupd.
#
#   entrypoint.sh <application command and its arguments>
#
# 1. When the database does not exist and a backup exists at BACKUPD_URL, it
#    is restored (`backupd restore --if-missing --if-replica-exists`).
# 2. backupd replaces this shell (`exec`), so it is the process that gets the
#    container's signals: SIGTERM reaches backupd, which forwards it to the
#    application, waits for it, ships what is durable, writes a final restore
#    point and releases the lease (within shutdownGrace). The container exits
#    with the application's code (4 when the application exited 0 but the stop
#    left commits in no restore point).
#
# Step 1 is `restore` rather than only `replicate --restore-if-missing`
# (which would restore as well) because `restore` also says, on stderr, when
# the bucket holds shipped data newer than the restore point it used (a
# predecessor that crashed): that data is in no restore point and is not
# restored. `replicate` keeps --restore-if-missing for the first boot at a
# new URL: nothing was restored in step 1, so the database is still missing;
# backupd starts the application, waits for it to create the database (in WAL
# mode), then backs it up.
#
# Environment:
#   BACKUPD_DATABASE  the database's path, e.g. /data/app.db (required)
#   BACKUPD_URL       where it is backed up, e.g. s3://my-bucket/app (required)
#   BACKUPD_LISTEN    host:port for /healthz, /livez, /readyz, /metrics
#                     (optional; 0.0.0.0:9090 for Kubernetes probes)
#   BACKUPD_BIN       the backupd command (default: backupd); split on
#                     spaces, e.g. "node /opt/backupd/apps/backupd/bin/backupd.js",
#                     so none of its words may contain a space
# backupd itself reads BACKUPD_INTERVAL, BACKUPD_RESTORE_POINT_INTERVAL,
# BACKUPD_RETENTION, BACKUPD_LEASE_TTL, BACKUPD_SHUTDOWN_GRACE, ... and the
# store's credentials (AWS_*, AZURE_STORAGE_*, GOOGLE_APPLICATION_CREDENTIALS)
# from the environment; they pass through unchanged.
set -eu

fail() {
  echo "entrypoint: $1" >&2
  exit 2
}

[ -n "${BACKUPD_DATABASE:-}" ] || fail "BACKUPD_DATABASE is not set (the database's path, e.g. /data/app.db)"
[ -n "${BACKUPD_URL:-}" ] || fail "BACKUPD_URL is not set (where the database is backed up, e.g. s3://my-bucket/app)"
[ "$#" -gt 0 ] || fail "no application command given (usage: entrypoint.sh <command> [arguments...])"

# The application's command as one string for --exec, which runs it with
# `sh -c "exec <command>"`: every argument single-quoted (a ' inside one
# becomes '\''), so spaces, quotes and $ in arguments arrive unchanged.
application=""
for argument in "$@"; do
  quoted=$(printf '%s\n' "$argument" | sed "s/'/'\\\\''/g; 1s/^/'/; \$s/\$/'/")
  application="${application:+$application }$quoted"
done

# BACKUPD_BIN is split into words on purpose; no glob in it is expanded.
set -f
# shellcheck disable=SC2086
set -- ${BACKUPD_BIN:-backupd}
set +f

mkdir -p "$(dirname "$BACKUPD_DATABASE")"

"$@" restore "$BACKUPD_URL" "$BACKUPD_DATABASE" --if-missing --if-replica-exists

if [ -n "${BACKUPD_LISTEN:-}" ]; then
  exec "$@" replicate "$BACKUPD_DATABASE" "$BACKUPD_URL" \
    --restore-if-missing --listen "$BACKUPD_LISTEN" --exec "$application"
fi
exec "$@" replicate "$BACKUPD_DATABASE" "$BACKUPD_URL" \
  --restore-if-missing --exec "$application"
