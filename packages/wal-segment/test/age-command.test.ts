/**
 * An encrypted envelope's body is an age file the standard tools open: the
 * bytes after the header, through `age -d -i key.txt`, then zstd, give the
 * snapshot back (the binding is a skippable frame zstd passes over).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { zstdDecompressSync } from 'node:zlib';
import { parseIdentityFile, parseRecipient } from '@x/age-envelope';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeSegmentObject, encodeSegmentObject, readSegmentObjectHeader } from '../src/index.ts';

const bin = fileURLToPath(new URL('../../../.servers/bin/', import.meta.url));
const AGE = join(bin, 'age');
const AGE_KEYGEN = join(bin, 'age-keygen');
const present = existsSync(AGE) && existsSync(AGE_KEYGEN);
if (!present && process.env.CI === 'true')
  throw new Error(
    `the age command is required under CI=true: run scripts/install-servers.sh (${AGE})`,
  );

const directory = mkdtempSync(join(tmpdir(), 'wal-segment-age-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

describe.skipIf(!present)('encrypted envelopes and the age command', () => {
  it('age -d opens the body of a snapshot object; zstd -d of that is the snapshot', () => {
    const keyFile = join(directory, 'key.txt');
    execFileSync(AGE_KEYGEN, ['-o', keyFile], { stdio: 'pipe' });
    const recipient = execFileSync(AGE_KEYGEN, ['-y', keyFile], { encoding: 'utf8' }).trim();
    const snapshot = new Uint8Array(
      Buffer.concat([randomBytes(100_000), Buffer.alloc(200_000, 7)]),
    );
    const stored = encodeSegmentObject(
      snapshot,
      {
        codec: 'zstd',
        kind: 'snapshot',
        generation: 1,
        start: 0,
        end: snapshot.length,
        commits: 1,
        previousCrc32: 0,
        lineage: 'age-command',
      },
      { recipients: [parseRecipient(recipient)] },
    );
    const { headerBytes } = readSegmentObjectHeader(stored);
    const body = join(directory, 'body.age');
    writeFileSync(body, stored.subarray(headerBytes));
    const opened = execFileSync(AGE, ['-d', '-i', keyFile, body], { maxBuffer: 1 << 26 });
    expect(new Uint8Array(zstdDecompressSync(opened))).toEqual(snapshot);
    // And the key file as age-keygen wrote it opens the whole object here.
    const identities = parseIdentityFile(readFileSync(keyFile, 'utf8'), 'key.txt');
    expect(decodeSegmentObject(stored, { identities }).body).toEqual(snapshot);
  });
});
