/**
 * A registry on 127.0.0.1 that serves one npm scope from packed tarballs, so
 * `npm install` resolves `@x/store@^0.1.0` inside a tarball the way it will
 * once the packages are published (npm's `--@x:registry=<url>`), while every
 * other package comes from the usual registry. It also keeps installs away
 * from whoever may own the placeholder scope on the public registry.
 *
 * Runs in a process of its own (`node scope-registry.ts <packed.json>`,
 * printing its URL), so a caller may wait on npm synchronously.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface PackedPackage {
  readonly name: string;
  readonly version: string;
  readonly tarball: string;
  /** package.json as it is in the tarball. */
  readonly manifest: Record<string, unknown>;
}

/** package.json as packed in `tarball` (an npm tarball: everything under `package/`). */
export function readPackedManifest(tarball: string): Record<string, unknown> {
  const text = execFileSync('tar', ['-xzOf', tarball, 'package/package.json'], {
    encoding: 'utf8',
  });
  return JSON.parse(text) as Record<string, unknown>;
}

async function serve(packages: readonly PackedPackage[]): Promise<string> {
  const byName = new Map<string, { pkg: PackedPackage; bytes: Buffer }>();
  for (const pkg of packages) byName.set(pkg.name, { pkg, bytes: readFileSync(pkg.tarball) });
  const server: Server = createServer((request, response) => {
    const path = decodeURIComponent(new URL(request.url ?? '/', 'http://x').pathname).slice(1);
    if (path.startsWith('-/tarballs/')) {
      const file = path.slice('-/tarballs/'.length);
      const entry = [...byName.values()].find(({ pkg }) => basename(pkg.tarball) === file);
      if (entry) {
        response.writeHead(200, { 'content-type': 'application/octet-stream' });
        response.end(entry.bytes);
        return;
      }
    }
    const entry = byName.get(path);
    if (!entry) {
      response.writeHead(404, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: `not found: ${path}` }));
      return;
    }
    const { pkg, bytes } = entry;
    const { address, port } = server.address() as AddressInfo;
    const packument = {
      name: pkg.name,
      'dist-tags': { latest: pkg.version },
      versions: {
        [pkg.version]: {
          ...pkg.manifest,
          _id: `${pkg.name}@${pkg.version}`,
          dist: {
            tarball: `http://${address}:${port}/-/tarballs/${basename(pkg.tarball)}`,
            integrity: `sha512-${createHash('sha512').update(bytes).digest('base64')}`,
            shasum: createHash('sha1').update(bytes).digest('hex'),
          },
        },
      },
    };
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify(packument));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  return `http://127.0.0.1:${port}/`;
}

export interface ScopeRegistry {
  /** For npm: `--<scope>:registry=<url>`. */
  readonly url: string;
  close(): void;
}

/** Starts the registry in a child process; resolves once it listens. */
export function startScopeRegistry(packedList: string): Promise<ScopeRegistry> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), packedList], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let output = '';
    child.on('error', reject);
    child.on('exit', (code) => reject(new Error(`the scope registry exited with ${code}`)));
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      const url = /^(http:\S+)\n/m.exec(output)?.[1];
      if (url) resolve({ url, close: () => child.kill() });
    });
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const packages = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as PackedPackage[];
  process.stdout.write(`${await serve(packages)}\n`);
  // Ends with the parent.
  process.on('disconnect', () => process.exit(0));
  setInterval(() => {
    if (process.ppid === 1) process.exit(0);
  }, 1_000);
}
