#!/usr/bin/env bash
# Installs the Go-built test servers (and the age command, the reference the
# age envelope is tested against), at pinned versions, into .servers/bin
# (git-ignored). npm-distributed servers (Azurite, s3rver) come with
# `pnpm install` as dev dependencies. Nothing is fetched except through the Go
# module proxy. Idempotent: a server already built at its pinned version is
# left alone.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="$repo_root/.servers/bin"
mkdir -p "$bin_dir"

# name  module-path-to-main  version
servers=(
  "versitygw github.com/versity/versitygw/cmd/versitygw v1.8.0"
  "fake-gcs-server github.com/fsouza/fake-gcs-server v1.56.1"
  "minio github.com/minio/minio v0.0.0-20260212201848-7aac2a2c5b7c"
  "age filippo.io/age/cmd/age v1.3.1"
  "age-keygen filippo.io/age/cmd/age-keygen v1.3.1"
)

failed=()
for entry in "${servers[@]}"; do
  read -r name module version <<<"$entry"
  stamp="$bin_dir/.$name.version"
  if [ -x "$bin_dir/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
    echo "servers: $name $version already installed"
    continue
  fi
  echo "servers: installing $name $version"
  if GOBIN="$bin_dir" CGO_ENABLED=0 go install "$module@$version"; then
    echo "$version" >"$stamp"
  else
    echo "servers: $name $version failed to build" >&2
    failed+=("$name")
  fi
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "servers: not installed: ${failed[*]}" >&2
  # MinIO is optional (its suite is skipped with a note when absent); the
  # others are required.
  for name in "${failed[@]}"; do
    [ "$name" = "minio" ] || exit 1
  done
fi
