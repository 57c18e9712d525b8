/**
 * The envelope against the reference implementation: the `age` and
 * `age-keygen` commands (built by scripts/install-servers.sh into
 * .servers/bin). What this package writes, `age -d` opens; what `age -r`
 * writes, this package opens; keys from `age-keygen` are taken as they are.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import {
  decrypt,
  encrypt,
  generateIdentity,
  parseIdentity,
  parseIdentityFile,
  parseRecipient,
} from '../src/index.ts';

const bin = fileURLToPath(new URL('../../../.servers/bin/', import.meta.url));
const AGE = join(bin, 'age');
const AGE_KEYGEN = join(bin, 'age-keygen');
const present = existsSync(AGE) && existsSync(AGE_KEYGEN);
if (!present && process.env.CI === 'true')
  throw new Error(
    `the age command is required under CI=true: run scripts/install-servers.sh (${AGE})`,
  );

const directory = mkdtempSync(join(tmpdir(), 'age-envelope-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

/** Sizes around the 64 KiB chunk: empty, one byte, one short of, exactly, one past, several chunks. */
const SIZES = [0, 1, 65_535, 65_536, 65_537, 3 * 65_536, 200_001];

function keygen(name: string): { file: string; recipient: string } {
  const file = join(directory, name);
  execFileSync(AGE_KEYGEN, ['-o', file], { stdio: 'pipe' });
  const recipient = execFileSync(AGE_KEYGEN, ['-y', file], { encoding: 'utf8' }).trim();
  return { file, recipient };
}

describe.skipIf(!present)('age envelope against the age command', () => {
  it('takes age-keygen files as they are, and derives the recipient age-keygen -y prints', () => {
    const { file, recipient } = keygen('derive.txt');
    const [identity] = parseIdentityFile(readFileSync(file, 'utf8'), 'derive.txt');
    expect(identity?.recipient.text).toBe(recipient);
    expect(parseRecipient(recipient).text).toBe(recipient);
  });

  it.each(SIZES)(
    'age -d opens what encrypt writes (%i bytes), for each of two recipients',
    async (size) => {
      const first = keygen(`ours-${size}-1.txt`);
      const second = keygen(`ours-${size}-2.txt`);
      const plaintext = randomBytes(size);
      const sealed = await encrypt(plaintext, [
        parseRecipient(first.recipient),
        parseRecipient(second.recipient),
      ]);
      const file = join(directory, `ours-${size}.age`);
      writeFileSync(file, sealed);
      for (const key of [first, second]) {
        const opened = execFileSync(AGE, ['-d', '-i', key.file, file], { maxBuffer: 1 << 26 });
        expect(Buffer.compare(opened, plaintext)).toBe(0);
      }
    },
  );

  it.each(SIZES)('decrypt opens what age -r writes (%i bytes)', async (size) => {
    const key = keygen(`theirs-${size}.txt`);
    const plaintext = randomBytes(size);
    const input = join(directory, `theirs-${size}.bin`);
    const output = join(directory, `theirs-${size}.age`);
    writeFileSync(input, plaintext);
    execFileSync(AGE, ['-r', key.recipient, '-o', output, input]);
    const identities = parseIdentityFile(readFileSync(key.file, 'utf8'), key.file);
    const opened = await decrypt(new Uint8Array(readFileSync(output)), identities);
    expect(Buffer.compare(Buffer.from(opened), plaintext)).toBe(0);
  });

  it('age accepts a key pair made by generateIdentity', async () => {
    const pair = generateIdentity();
    const file = join(directory, 'generated.txt');
    writeFileSync(file, `# made by generateIdentity\n${pair.identity}\n`);
    expect(parseIdentity(pair.identity).recipient.text).toBe(pair.recipient);
    const sealed = join(directory, 'generated.age');
    writeFileSync(sealed, await encrypt(Buffer.from('hello'), [parseRecipient(pair.recipient)]));
    expect(execFileSync(AGE, ['-d', '-i', file, sealed], { encoding: 'utf8' })).toBe('hello');
  });
});
