/**
 * A secret key put in every wrong place (recipients in a file, in the
 * environment, in place of a path, inside malformed identity files, on the
 * command line) is refused without ever being shown: not in a ConfigError's
 * message, problems or stack, not in a UsageError, not on the CLI's stderr
 * or stdout. Loaded identities do not print their key either. Each case
 * first checks that the secret is in what it wrote, so a check that cannot
 * see a leak cannot pass.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { inspect } from 'node:util';
import { generateIdentity } from '@x/age-envelope';
import { afterAll, describe, expect, it } from 'vitest';
import { AGE_IDENTITY_FILE_OPTIONS } from '../src/cli/age-identity-option.ts';
import { parseOptionValues, readArguments } from '../src/cli/options.ts';
import { parseConfig, singleDatabaseConfig } from '../src/config.ts';
import { commandLineIdentities, loadEncryptionKeys } from '../src/encryption-settings.ts';
import { main } from '../src/main.ts';
import { REDACTED, Redactor } from '../src/redact.ts';

const directory = mkdtempSync(join(tmpdir(), 'backupd-secret-keys-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

const { identity: SECRET, recipient: RECIPIENT } = generateIdentity();
/** The key's data, without the prefix every message may name. */
const DATA = SECRET.slice('AGE-SECRET-KEY-1'.length);

/** Whether `text` shows the key: whole or in part (either end of its data), in either case. */
function leaks(text: string): boolean {
  const lower = text.toLowerCase();
  return [SECRET, DATA.slice(0, 16), DATA.slice(-16)].some((part) =>
    lower.includes(part.toLowerCase()),
  );
}

/** Everything an error shows: message, stack, and a ConfigError's problems. */
function shownBy(action: () => unknown): string {
  try {
    action();
  } catch (error) {
    if (!(error instanceof Error)) throw error;
    const problems = 'problems' in error ? JSON.stringify(error.problems) : '';
    return `${error.message}\n${error.stack ?? ''}\n${problems}`;
  }
  throw new Error('expected the action to throw');
}

function file(name: string, content: string): string {
  const path = join(directory, name);
  writeFileSync(path, content, { mode: 0o600 });
  return path;
}

const yaml = (encryption: string) =>
  `databases:\n  - path: app.db\n    url: file:///var/backups/app\n    encryption:\n${encryption}`;

describe('leaks (meta: the check sees a key)', () => {
  it('finds the key whole, in lower case, and either end of its data alone', () => {
    expect(leaks(`x ${SECRET} y`)).toBe(true);
    expect(leaks(SECRET.toLowerCase())).toBe(true);
    expect(leaks(`"${DATA.slice(0, 20)}…"`)).toBe(true);
    expect(leaks(`…${DATA.slice(-20)}`)).toBe(true);
    expect(leaks(`the recipient ${RECIPIENT}; AGE-SECRET-KEY-1…`)).toBe(false);
  });

  it('and shownBy reads what a ConfigError carries', () => {
    expect(leaks(shownBy(() => parseConfig(`${yaml(`      ${SECRET}: x\n`)}`, cfg())))).toBe(false);
    expect(
      leaks(
        shownBy(() => {
          throw Object.assign(new Error('x'), { problems: [SECRET] });
        }),
      ),
    ).toBe(true);
  });
});

function cfg() {
  return { env: {}, baseDir: directory };
}

const CONFIG_FILES: readonly [string, string][] = [
  ['a recipients list item', `      ageRecipients: [${RECIPIENT}, ${SECRET}]\n`],
  ['the recipients as one string', `      ageRecipients: "${RECIPIENT},${SECRET}"\n`],
  ['a recipient with text before the key', `      ageRecipients: ["key: ${SECRET}"]\n`],
  ['a recipient in lower case', `      ageRecipients: [${SECRET.toLowerCase()}]\n`],
  [
    'an identity file pasted as a recipient',
    `      ageRecipients:\n        - |\n          # created: 2026-12-07T00:00:00Z\n          # public key: ${RECIPIENT}\n          ${SECRET}\n`,
  ],
  ['the key in place of the identity file', `      ageIdentityFile: ${SECRET}\n`],
  ['the key in an identity file list', `      ageIdentityFile: [keys.txt, ${SECRET}]\n`],
  ['the key as the whole section', `      ${SECRET}\n`],
  ['the key as an unknown setting', `      ${SECRET}: true\n      ageRecipients: [${RECIPIENT}]\n`],
];

describe('a config file', () => {
  it.each(CONFIG_FILES)('%s: refused, the key not shown', (_name, encryption) => {
    const text = yaml(encryption);
    expect(leaks(text)).toBe(true);
    const shown = shownBy(() => parseConfig(text, cfg()));
    expect(shown).toContain('databases[0].encryption');
    expect(leaks(shown)).toBe(false);
  });
});

describe('the environment', () => {
  const cases: readonly [string, Record<string, string>][] = [
    ['BACKUPD_AGE_RECIPIENTS, alone', { BACKUPD_AGE_RECIPIENTS: SECRET }],
    ['BACKUPD_AGE_RECIPIENTS, second', { BACKUPD_AGE_RECIPIENTS: `${RECIPIENT},${SECRET}` }],
    ['BACKUPD_AGE_IDENTITY_FILE', { BACKUPD_AGE_IDENTITY_FILE: SECRET }],
  ];

  it.each(cases)('%s: refused, naming the variable, the key not shown', (_name, env) => {
    expect(leaks(JSON.stringify(env))).toBe(true);
    const shown = shownBy(() =>
      singleDatabaseConfig(
        { path: 'app.db', url: 'file:///var/backups/app' },
        { env, baseDir: directory },
      ),
    );
    expect(shown).toContain(Object.keys(env)[0]);
    expect(leaks(shown)).toBe(false);
  });

  it('BACKUPD_AGE_IDENTITY_FILE for restore and verify: refused, the key not shown', () => {
    const shown = shownBy(() =>
      commandLineIdentities({
        files: undefined,
        env: { BACKUPD_AGE_IDENTITY_FILE: SECRET },
        cwd: directory,
      }),
    );
    expect(shown).toContain('BACKUPD_AGE_IDENTITY_FILE');
    expect(leaks(shown)).toBe(false);
  });
});

describe('malformed identity files', () => {
  const cases: readonly [string, string][] = [
    ['cut short', `${SECRET.slice(0, -3)}\n`],
    ['with text after the key', `${SECRET}x\n`],
    ['with a comment on the same line', `${SECRET} # mine\n`],
    ['two keys on one line', `${SECRET} ${SECRET}\n`],
    ['in lower case', `${SECRET.toLowerCase()}\n`],
    [
      'after a good line, a key with one character changed',
      `${generateIdentity().identity}\n${SECRET.slice(0, -1)}${SECRET.endsWith('Q') ? 'P' : 'Q'}\n`,
    ],
    ['as an assignment', `AGE_KEY=${SECRET}\n`],
  ];

  it.each(cases)(
    '%s: refused, naming the setting, file and line, the key not shown',
    (name, content) => {
      const path = file(`${name.replace(/\W+/g, '-')}.txt`, content);
      expect(leaks(content)).toBe(true);
      const shown = shownBy(() =>
        loadEncryptionKeys(
          {
            recipients: [],
            identityFiles: [{ path, setting: 'databases[0].encryption.ageIdentityFile' }],
          },
          'backupd.yml',
        ),
      );
      expect(shown).toContain(`databases[0].encryption.ageIdentityFile: ${path} line`);
      expect(leaks(shown)).toBe(false);
    },
  );
});

describe('--age-identity-file', () => {
  it('refuses the key in place of the path, not showing it', () => {
    const { raw } = readArguments(AGE_IDENTITY_FILE_OPTIONS, ['--age-identity-file', SECRET]);
    expect(leaks(JSON.stringify(raw))).toBe(true);
    const shown = shownBy(() => parseOptionValues(AGE_IDENTITY_FILE_OPTIONS, raw));
    expect(shown).toContain('--age-identity-file: a secret key (AGE-SECRET-KEY-1…) was given');
    expect(leaks(shown)).toBe(false);
  });
});

function sink(): { stream: Writable; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk.toString('utf8'));
      callback();
    },
  });
  return { stream, text: () => chunks.join('') };
}

async function run(argv: string[], env: Record<string, string> = {}) {
  const stdout = sink();
  const stderr = sink();
  const code = await main(argv, {
    env: { BACKUPD_CPU_PRIORITY: 'normal', ...env },
    stdout: stdout.stream,
    stderr: stderr.stream,
    cwd: directory,
  });
  return { code, output: `${stdout.text()}${stderr.text()}` };
}

describe('the command line', () => {
  it('prints no key, for a key in a config file, the environment, a flag or an unknown option', async () => {
    const config = file('leaky.yml', yaml(`      ageRecipients: [${SECRET}]\n`));
    const runs = [
      await run(['replicate', '-c', config]),
      await run(['replicate', 'app.db', 'file:///var/backups/app'], {
        BACKUPD_AGE_RECIPIENTS: SECRET,
      }),
      await run(['replicate', 'app.db', 'file:///var/backups/app'], {
        BACKUPD_AGE_IDENTITY_FILE: SECRET,
      }),
      await run(['restore', 'file:///var/backups/app', 'out.db', '--age-identity-file', SECRET]),
      await run(['verify', 'file:///var/backups/app', `--age-identity-file=${SECRET}`]),
      await run(['verify', 'file:///var/backups/app', `--${SECRET}`]),
    ];
    for (const { code, output } of runs) {
      expect(code).toBe(2);
      expect(leaks(output)).toBe(false);
    }
    // backupd's own messages say what was given; parseArgs' echo is redacted.
    for (const { output } of runs.slice(0, -1))
      expect(output).toContain('a secret key (AGE-SECRET-KEY-1…) was given where');
    expect(runs.at(-1)!.output).toContain(`Unknown option '--AGE-SECRET-KEY-${REDACTED}'`);
  });
});

describe('loaded keys', () => {
  it('do not print their secret, as JSON or inspected', () => {
    const path = file('loaded.txt', `# public key: ${RECIPIENT}\n${SECRET}\n`);
    const keys = loadEncryptionKeys(
      { recipients: [], identityFiles: [{ path, setting: 'BACKUPD_AGE_IDENTITY_FILE' }] },
      'environment',
    );
    expect(keys.identities[0]!.recipient.text).toBe(RECIPIENT);
    expect(leaks(JSON.stringify(keys))).toBe(false);
    expect(leaks(inspect(keys, { depth: null, showHidden: true }))).toBe(false);
  });
});

describe('the redactor', () => {
  it('removes a key from whatever reaches a print, in either case, keeping its prefix', () => {
    const redactor = new Redactor([]);
    const text = redactor.text(
      `failed: ${SECRET} and ${SECRET.toLowerCase()}; recipient ${RECIPIENT}`,
    );
    expect(leaks(text)).toBe(false);
    expect(text).toBe(
      `failed: AGE-SECRET-KEY-${REDACTED} and age-secret-key-${REDACTED}; recipient ${RECIPIENT}`,
    );
  });
});
