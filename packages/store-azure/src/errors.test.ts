import { describe, expect, it } from 'vitest';
import { azureFailureOf, redactSecrets, sanitizedCause, unexpectedFailure } from './errors.ts';

const accountKey =
  'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

describe('redactSecrets', () => {
  it('removes the account key and SAS signature of a connection string and URLs', () => {
    const text = `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${accountKey};EndpointSuffix=core.windows.net https://acct.blob.core.windows.net/c/x?sv=2024-08-04&sig=abc%2Fdef%3D&se=2030 SharedAccessSignature=sv=1&sig=zzz`;
    const redacted = redactSecrets(text);
    expect(redacted).not.toContain(accountKey);
    expect(redacted).not.toContain('abc%2Fdef');
    expect(redacted).not.toContain('sig=zzz');
    expect(redacted).toContain('AccountName=acct');
    expect(redacted).toContain('sig=[redacted]');
  });

  it('removes authorization headers and any literal secret it is given', () => {
    const redacted = redactSecrets(
      'Authorization: SharedKey acct:c2lnbmF0dXJl and Bearer eyJhbGciOi and mysecretvalue',
      ['mysecretvalue'],
    );
    expect(redacted).not.toContain('c2lnbmF0dXJl');
    expect(redacted).not.toContain('eyJhbGciOi');
    expect(redacted).not.toContain('mysecretvalue');
  });
});

describe('error mapping', () => {
  const restError = Object.assign(
    new Error(`Server failed to authenticate the request. sig=secretsig\nRequestId:1\nTime:now`),
    {
      name: 'RestError',
      statusCode: 403,
      code: 'AuthenticationFailed',
      details: { errorCode: 'AuthenticationFailed' },
      request: {
        url: 'https://acct.blob.core.windows.net/c/x?sig=secretsig',
        headers: { authorization: `SharedKey acct:${accountKey}` },
      },
    },
  );

  it('reads the status and the service error code', () => {
    expect(azureFailureOf(restError)).toEqual({
      statusCode: 403,
      errorCode: 'AuthenticationFailed',
    });
    expect(azureFailureOf('boom')).toEqual({ statusCode: undefined, errorCode: undefined });
  });

  it('never passes the request (URL, headers) on in the cause', () => {
    const cause = sanitizedCause(restError, [accountKey]);
    const shown = `${cause.message} ${JSON.stringify(cause)}`;
    expect(shown).not.toContain('secretsig');
    expect(shown).not.toContain(accountKey);
    expect(cause).toMatchObject({ statusCode: 403, errorCode: 'AuthenticationFailed' });
    const failure = unexpectedFailure('put', 'k', restError, [accountKey]);
    expect(failure.message).toContain('HTTP 403 AuthenticationFailed');
    expect(`${failure.message} ${JSON.stringify(failure)}`).not.toContain('secretsig');
  });

  it('a meta-check: the raw SDK error does contain the secrets the mapping removes', () => {
    expect(JSON.stringify(restError)).toContain('secretsig');
    expect(JSON.stringify(restError)).toContain(accountKey);
  });
});
