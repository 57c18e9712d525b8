// Builds dist/: the backupd CLI as one ES module (the cloud adapters stay
// out, see below), so the command starts without type-stripping and
// resolving some three hundred source files. In a checkout, bin/backupd.js
// runs the bundle only while it is newer than every file it was built from
// (listed in dist/inputs.json), and the sources otherwise; installed from
// the registry it always runs the bundle. Run by `pnpm install`
// (the root's postinstall), by `pnpm --filter backupd bundle`, and by
// `prepack` with `--strict` (a failed build then fails the pack).
import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const app = dirname(dirname(fileURLToPath(import.meta.url)));
const out = join(app, 'dist');
const repository = dirname(dirname(app));

await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });
let result;
try {
  result = await build({
    entryPoints: { backupd: join(app, 'src', 'main.ts') },
    outdir: out,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    conditions: ['@x/source'],
    // The cloud adapters (and their SDKs) stay out: they load only for their
    // scheme, from the adapter's own package (its sources, through the
    // `@x/source` condition bin/backupd.js adds), where pnpm put their SDKs.
    // koffi (the SQLite tap's fcntl call) stays out too: it loads a native
    // library of its own platform package, resolved from where it is installed.
    external: ['@x/store-s3', '@x/store-azure', '@x/store-gcs', 'koffi'],
    // CommonJS dependencies (pino, yaml) call require(): give the bundle one.
    banner: {
      js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
    },
    metafile: true,
    logLevel: 'silent',
    legalComments: 'none',
  });
} catch (error) {
  // `--strict` (prepack): a package without its bundle must not be made.
  if (process.argv.includes('--strict')) throw error;
  // Never fails an install: without a bundle the command runs its sources.
  await rm(out, { recursive: true, force: true });
  process.stderr.write(
    `backupd bundle: not built (${error instanceof Error ? error.message.split('\n')[0] : String(error)}); backupd runs from its sources\n`,
  );
  process.exit(0);
}
const inputs = Object.keys(result.metafile.inputs)
  .map((input) => relative(repository, join(process.cwd(), input)))
  .filter((input) => !input.startsWith('..'))
  .sort();
await writeFile(join(out, 'inputs.json'), `${JSON.stringify({ inputs }, null, 2)}\n`);
const size = (await stat(join(out, 'backupd.js'))).size;
process.stdout.write(
  `backupd bundle: dist/backupd.js (${(size / 1024).toFixed(0)} KiB, ${inputs.length} inputs)\n`,
);
