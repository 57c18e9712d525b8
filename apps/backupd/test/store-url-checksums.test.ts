/**
 * `?checksums=` on s3:// URLs: parsed strictly, and handed to the S3 adapter,
 * whose SDK client is then configured with it (the wire-level effect is
 * proven against real servers in packages/store-s3/test/wire.test.ts).
 */
import type { S3Store } from '@x/store-s3';
import { describe, expect, it } from 'vitest';
import { openStore } from '../src/open-store.ts';
import { parseStoreUrl, StoreUrlError } from '../src/store-url.ts';

const endpoint = encodeURIComponent('http://127.0.0.1:9');

async function sdkSettings(store: S3Store): Promise<[string, string]> {
  const config = store.client.config as unknown as {
    requestChecksumCalculation: () => Promise<string>;
    responseChecksumValidation: () => Promise<string>;
  };
  return [await config.requestChecksumCalculation(), await config.responseChecksumValidation()];
}

describe('parseStoreUrl: checksums', () => {
  it.each(['when-required', 'when-supported'] as const)('accepts checksums=%s', (value) => {
    expect(parseStoreUrl(`s3://bucket/db?endpoint=${endpoint}&checksums=${value}`)).toEqual({
      scheme: 's3',
      bucket: 'bucket',
      prefix: 'db',
      endpoint: 'http://127.0.0.1:9',
      checksums: value,
    });
  });

  it('leaves it unset when not given', () => {
    expect(parseStoreUrl('s3://bucket/db')).toEqual({
      scheme: 's3',
      bucket: 'bucket',
      prefix: 'db',
    });
  });

  it.each(['WHEN_REQUIRED', 'never', ''])(
    'refuses checksums=%j, naming the values it takes',
    (value) => {
      expect(() => parseStoreUrl(`s3://bucket/db?checksums=${value}`)).toThrow(StoreUrlError);
      expect(() => parseStoreUrl(`s3://bucket/db?checksums=${value}`)).toThrow(
        /checksums must be when-required or when-supported/,
      );
    },
  );

  it.each([
    's3://bucket/db?checksums=when-required&checksums=bogus',
    's3://bucket/db?region=eu-west-1&region=us-east-1',
    'gs://bucket/db?project=a&project=a',
  ])('refuses an option given twice (%s) instead of keeping the first', (url) => {
    expect(() => parseStoreUrl(url)).toThrow(
      new StoreUrlError(
        `option "${new URL(url).searchParams.keys().next().value}" is given more than once; give it once`,
      ),
    );
  });

  it('is an s3 option only', () => {
    expect(() => parseStoreUrl('gs://bucket/db?checksums=when-required')).toThrow(
      /unknown option "checksums" for gs/,
    );
  });
});

describe('openStore: checksums reach the S3 SDK', () => {
  const env = { AWS_ACCESS_KEY_ID: 'id', AWS_SECRET_ACCESS_KEY: 'secret' };

  it('checksums=when-supported configures WHEN_SUPPORTED on a custom endpoint', async () => {
    const { store } = await openStore(
      parseStoreUrl(`s3://bucket/db?endpoint=${endpoint}&checksums=when-supported`),
      env,
    );
    expect((store as S3Store).checksums).toBe('when-supported');
    expect(await sdkSettings(store as S3Store)).toEqual(['WHEN_SUPPORTED', 'WHEN_SUPPORTED']);
  });

  it('a custom endpoint without the option gets when-required', async () => {
    const { store } = await openStore(parseStoreUrl(`s3://bucket/db?endpoint=${endpoint}`), env);
    expect((store as S3Store).checksums).toBe('when-required');
    expect(await sdkSettings(store as S3Store)).toEqual(['WHEN_REQUIRED', 'WHEN_REQUIRED']);
  });

  it('AWS itself without the option is left to the SDK; with it, configured', async () => {
    const plain = await openStore(parseStoreUrl('s3://bucket/db?region=eu-west-1'), env);
    expect((plain.store as S3Store).checksums).toBeUndefined();
    const asked = await openStore(
      parseStoreUrl('s3://bucket/db?region=eu-west-1&checksums=when-required'),
      env,
    );
    expect(await sdkSettings(asked.store as S3Store)).toEqual(['WHEN_REQUIRED', 'WHEN_REQUIRED']);
  });
});
