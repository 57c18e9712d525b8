/**
 * Keeps credentials out of all backupd prints or serves (logs, errors,
 * /metrics, /healthz, the status page) through {@link Redactor.text}, in two
 * layers, as neither alone is enough: the values of credential-named variables
 * ({@link SECRET_ENV_NAMES}, {@link SECRET_NAME_PATTERN}) wherever they appear,
 * and known {@link SHAPES} (connection-string keys, SAS and AWS signatures,
 * `Authorization` headers, PEM keys, age secret keys). A secret of neither
 * kind (one an SDK reads from a file) stays out only because backupd never
 * prints SDK configuration: keep it so. In full: SECURITY.md, "Credentials".
 */

import { AGE_SECRET_KEY_SHAPE } from './age-secret-key-text.ts';

export const SECRET_ENV_NAMES = [
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_ACCESS_KEY_ID',
  'AZURE_STORAGE_KEY',
  'AZURE_STORAGE_ACCOUNT_KEY',
  'AZURE_STORAGE_CONNECTION_STRING',
  'AZURE_STORAGE_SAS_TOKEN',
  'AZURE_CLIENT_SECRET',
  'GOOGLE_APPLICATION_CREDENTIALS_JSON',
  'GCS_CREDENTIALS',
];

const SECRET_NAME_PATTERN =
  /(SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|ACCOUNT_KEY|ACCESS_KEY|PRIVATE_KEY|_KEY$|CONNECTION_STRING|SAS)/i;

const SHAPES: readonly RegExp[] = [
  /(AccountKey=)[^;\s"']+/gi,
  /(SharedAccessSignature=)[^;\s"']+/gi,
  /([?&]sig=)[^&\s"']+/gi,
  /(X-Amz-Signature=)[^&\s"']+/gi,
  /(X-Amz-Credential=)[^&\s"']+/gi,
  /(X-Amz-Security-Token=)[^&\s"']+/gi,
  /("?authorization"?\s*[:=]\s*"?)[^"\n,}]+/gi,
  /(-----BEGIN [A-Z ]*PRIVATE KEY-----)[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----)/g,
  AGE_SECRET_KEY_SHAPE,
];

export const REDACTED = '[REDACTED]';

export class Redactor {
  readonly #values: string[];

  constructor(secrets: Iterable<string>) {
    // Longest first, so a secret that contains another is replaced whole.
    this.#values = [...new Set([...secrets].filter((value) => value.length >= 4))].sort(
      (a, b) => b.length - a.length,
    );
  }

  /** A redactor for every credential-looking variable in `env`. */
  static fromEnvironment(
    env: Readonly<Record<string, string | undefined>>,
    extra: Iterable<string> = [],
  ): Redactor {
    const values: string[] = [...extra];
    for (const [name, value] of Object.entries(env)) {
      if (!value) continue;
      if (SECRET_ENV_NAMES.includes(name) || SECRET_NAME_PATTERN.test(name)) values.push(value);
    }
    return new Redactor(values);
  }

  text(input: string): string {
    let output = input;
    for (const value of this.#values) output = output.split(value).join(REDACTED);
    for (const shape of SHAPES) {
      output = output.replace(shape, (_whole, head: string, tail?: string) =>
        typeof tail === 'string' && tail.startsWith('-----END')
          ? `${head}${REDACTED}${tail}`
          : `${head}${REDACTED}`,
      );
    }
    return output;
  }

  /** Redacts every string inside a JSON-like value (returns a copy). */
  value<T>(input: T): T {
    return JSON.parse(this.text(JSON.stringify(input))) as T;
  }
}
