#!/usr/bin/env node
// The backupd command, in this process (no wrapper process: signals and exit
// codes are the command's own).
//
// Installed from the registry (no src/ beside dist/), it runs the bundle in
// ../dist, which `prepack` builds. In a checkout of the repository it runs
// that bundle (built by `pnpm install`, see scripts/bundle.mjs) while it is
// newer than every source file it was built from, and the TypeScript
// sources otherwise (Node >= 22.18 strips types natively; the `@x/source`
// export condition makes the workspace packages resolve to their sources
// too). So an edited checkout always runs what is on disk, and a fresh
// install starts without type-stripping some three hundred files. The cloud
// adapters, left out of the bundle, load from their builds while those are
// fresh too, else from their sources.
// BACKUPD_FROM_SOURCES=1 forces the sources; BACKUPD_DEBUG=1 says which one
// runs.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';

// Checked before anything that needs a newer Node is loaded (a static import
// of a missing export would fail with a SyntaxError that names no version).
// 22.15 brings `module.registerHooks` (below) and zstd in node:zlib, 22.16
// the `node:sqlite` the SQLite source uses (`isTransaction`).
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 16)) {
  process.stderr.write(
    `backupd: needs Node.js 22.16 or newer; this is v${process.versions.node} (${process.execPath})\n`,
  );
  process.exit(1);
}
const { registerHooks } = await import('node:module');

const app = new URL('..', import.meta.url);
const repository = new URL('../..', app);
const bundle = new URL('dist/backupd.js', app);
const checkout = existsSync(new URL('src/main.ts', app));

/** In a checkout: whether the bundle is there and no input changed since it was built. */
function bundleIsFresh() {
  if (process.env.BACKUPD_FROM_SOURCES === '1') return false;
  try {
    const builtAt = statSync(bundle).mtimeMs;
    const { inputs } = JSON.parse(readFileSync(new URL('dist/inputs.json', app), 'utf8'));
    for (const input of inputs)
      if (statSync(new URL(input, repository)).mtimeMs > builtAt) return false;
    return true;
  } catch {
    // No bundle, an unreadable list, or an input gone: the sources decide.
    return false;
  }
}

const fromBundle = !checkout || bundleIsFresh();
if (!fromBundle && major === 22 && minor < 18) {
  // Node strips TypeScript types without a flag from 22.18 on.
  process.stderr.write(
    `backupd: running from the TypeScript sources needs Node.js 22.18 or newer; this is v${process.versions.node}. Run \`pnpm install\` to build the bundle, or use a newer Node\n`,
  );
  process.exit(1);
}
/**
 * In a checkout: whether the cloud adapters the bundle leaves out, and the
 * store package they import, have builds no source file is newer than.
 */
function adapterBuildsAreFresh() {
  try {
    for (const name of ['store', 'store-s3', 'store-azure', 'store-gcs']) {
      const root = new URL(`packages/${name}/`, repository);
      const builtAt = statSync(new URL('dist/index.js', root)).mtimeMs;
      for (const file of readdirSync(new URL('src/', root), { recursive: true }))
        if (statSync(new URL(`src/${file}`, root)).mtimeMs > builtAt) return false;
    }
    return true;
  } catch {
    return false;
  }
}

const adaptersFromSources = checkout && !(fromBundle && adapterBuildsAreFresh());
if (adaptersFromSources) {
  // The cloud adapters the bundle leaves out load from their sources while
  // their builds are stale (and everything does when the bundle is).
  // Installed, or built, they load from their builds.
  registerHooks({
    resolve(specifier, context, nextResolve) {
      const conditions = context.conditions.includes('@x/source')
        ? context.conditions
        : ['@x/source', ...context.conditions];
      return nextResolve(specifier, { ...context, conditions });
    },
  });
}
if (process.env.BACKUPD_DEBUG === '1')
  process.stderr.write(
    `backupd: running from ${fromBundle ? 'the bundle' : 'the sources'}, cloud adapters from their ${adaptersFromSources ? 'sources' : 'builds'}\n`,
  );
const { main } = await import(fromBundle ? bundle.href : '../src/main.ts');
process.exitCode = await main(process.argv.slice(2));
