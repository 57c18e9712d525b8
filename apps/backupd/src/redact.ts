/**
 * Keeps credentials out of everything backupd prints or serves: logs, error
 * messages, /metrics, /healthz and the status page all pass through
 * {@link Redactor.text}.
 *
 * Two layers, because neither alone is enough:
 * - known secret values: every environment variable whose name says it holds
 *   a credential (see {@link SECRET_ENV_NAMES} and the `*_SECRET*`, `*_TOKEN*`,
 *   `*_KEY*`, `*PASSWORD*` patterns) is replaced wherever its value appears;
 * - known shapes: `AccountKey=…`, `SharedAccessSignature=…`, SAS `sig=…`,
 *   `X-Amz-Signature=…`, `X-Amz-Credential=…`, `Authorization: …` headers,
 *   and PEM private keys.
 * Limits: a secret that is neither in the environment nor of a known shape
 * (for example one read by an SDK from a file) is only kept out because
 * backupd never prints SDK configuration; its errors are passed through this
 * filter all the same.
 */

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
