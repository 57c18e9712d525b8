#!/usr/bin/env bash
# Scaffolds packages/<dir> with the project's package.json, tsconfig and vitest
# project shapes. Usage: scripts/new-package.sh <dir> <name> "<description>" [private]
set -euo pipefail
dir="$1"; name="$2"; description="$3"; private="${4:-}"
mkdir -p "$dir/src"
node - "$dir" "$name" "$description" "$private" <<'JS'
const fs = require('node:fs');
const [dir, name, description, isPrivate] = process.argv.slice(2);
const pkg = {
  name,
  version: '0.1.0',
  description,
  license: 'Apache-2.0',
  ...(isPrivate ? { private: true } : {}),
  type: 'module',
  sideEffects: false,
  exports: {
    '.': { '@x/source': './src/index.ts', types: './dist/index.d.ts', import: './dist/index.js' },
    './package.json': './package.json',
  },
  files: ['dist', 'src', '!src/**/*.test.ts', '!dist/**/*.test.*'],
  engines: { node: '>=22' },
  scripts: {
    build: 'tsc -p tsconfig.build.json',
    typecheck: 'tsc -p tsconfig.json',
    publint: 'publint --strict',
  },
  ...(isPrivate ? {} : { publishConfig: { access: 'public' } }),
};
fs.writeFileSync(`${dir}/package.json`, `${JSON.stringify(pkg, null, 2)}\n`);
fs.writeFileSync(`${dir}/tsconfig.json`, `${JSON.stringify({ extends: '../../tsconfig.base.json', compilerOptions: { noEmit: true, customConditions: ['@x/source'] }, include: ['src', 'test'] }, null, 2)}\n`);
fs.writeFileSync(`${dir}/tsconfig.build.json`, `${JSON.stringify({ extends: '../../tsconfig.base.json', compilerOptions: { outDir: 'dist', rootDir: 'src' }, include: ['src'], exclude: ['src/**/*.test.ts'] }, null, 2)}\n`);
const short = name.replace('@x/', '');
if (!fs.existsSync(`${dir}/vitest.config.ts`)) fs.writeFileSync(`${dir}/vitest.config.ts`, `import { packageProject } from '../../vitest.shared.ts';\n\nexport default packageProject('${short}');\n`);
JS
