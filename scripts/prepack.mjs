// `prepack` of every published library (`node ../../scripts/prepack.mjs`,
// run by `pnpm pack` and `pnpm publish` in the package's folder). It builds
// the workspace packages this one depends on that have no build yet
// (turbo), then this package's dist/ from nothing: a tarball never holds
// output of a source file that changed or is gone, whatever dist/ held.
// Prepacks in one checkout take turns (a lock under .turbo/): `changeset
// pack` packs several packages at once, and one package's prepack would
// otherwise delete a dist/ that another's compiler is reading.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dir = process.cwd();
const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
const name = manifest.name;

function fail(message) {
  process.stderr.write(`prepack ${name}: ${message}\n`);
  process.exit(1);
}

function run(command, args, cwd) {
  const result = spawnSync(command, args, { cwd, stdio: 'inherit' });
  if (result.error) fail(`${command} could not start: ${result.error.message}`);
  if (result.status !== 0) fail(`${command} ${args.join(' ')} exited with ${result.status}`);
}

const lock = join(root, '.turbo', 'prepack.lock');
function holderIsAlive() {
  try {
    process.kill(Number(readFileSync(join(lock, 'pid'), 'utf8')), 0);
    return true;
  } catch (error) {
    // EPERM: alive, not ours. Anything else (no pid file yet, ESRCH): not alive.
    return error.code === 'EPERM';
  }
}
function takeLock() {
  mkdirSync(dirname(lock), { recursive: true });
  const giveUpAt = Date.now() + 15 * 60_000;
  for (let staleChecks = 0; ; ) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      return;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
    }
    // A holder that has not written its pid yet gets a few rounds.
    if (!holderIsAlive() && ++staleChecks > 5) {
      rmSync(lock, { recursive: true, force: true });
      staleChecks = 0;
      continue;
    }
    if (Date.now() > giveUpAt) fail(`another prepack has held ${lock} for 15 minutes`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
  }
}

const workspaceDependencies = Object.entries({
  ...manifest.dependencies,
  ...manifest.optionalDependencies,
  ...manifest.peerDependencies,
})
  .filter(([, spec]) => String(spec).startsWith('workspace:'))
  .map(([dependency]) => dependency);

/** The files a package's exports name (built output, for a library). */
function exportTargets(packageManifest) {
  const targets = [];
  (function collect(node) {
    if (typeof node === 'string') targets.push(node);
    else if (node && typeof node === 'object')
      for (const value of Object.values(node)) collect(value);
  })(packageManifest.exports);
  return targets;
}

/**
 * Whether a workspace dependency's exports all exist. Only unbuilt ones are
 * built: a turbo cache hit writes a dependency's dist/ again, under the
 * feet of `changeset pack` if it is packing that dependency at that moment.
 */
function isBuilt(dependency) {
  const home = join(dir, 'node_modules', ...dependency.split('/'));
  try {
    const targets = exportTargets(JSON.parse(readFileSync(join(home, 'package.json'), 'utf8')));
    return targets.length > 0 && targets.every((target) => existsSync(join(home, target)));
  } catch {
    return false;
  }
}

takeLock();
try {
  const unbuilt = workspaceDependencies.filter((dependency) => !isBuilt(dependency));
  if (unbuilt.length > 0) {
    const filters = unbuilt.map((dependency) => `--filter=${dependency}`);
    run(
      join(root, 'node_modules/.bin/turbo'),
      ['run', 'build', ...filters, '--output-logs=errors-only'],
      dir,
    );
  }
  rmSync(join(dir, 'dist'), { recursive: true, force: true });
  run(
    process.execPath,
    [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
    dir,
  );
} finally {
  rmSync(lock, { recursive: true, force: true });
}

// Every file the package's exports name must be in what is packed.
const missing = exportTargets(manifest).filter((target) => !existsSync(join(dir, target)));
if (missing.length > 0) fail(`exports name files the build did not make: ${missing.join(', ')}`);
process.stdout.write(`prepack ${name}: built dist/ from nothing\n`);
