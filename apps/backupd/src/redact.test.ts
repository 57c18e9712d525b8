import { describe, expect, it } from 'vitest';
import { REDACTED, Redactor } from './redact.ts';

describe('Redactor', () => {
  it('removes secret values taken from credential-named environment variables', () => {
    const redactor = Redactor.fromEnvironment({
      AWS_SECRET_ACCESS_KEY: 'canary-secret-123',
      HOME: '/root',
      MY_API_TOKEN: 'tok-987654',
    });
    const out = redactor.text('failed with canary-secret-123 and tok-987654 at /root');
    expect(out).not.toContain('canary-secret-123');
    expect(out).not.toContain('tok-987654');
    expect(out).toContain('/root');
  });
  it('removes credentials of known shapes even when they are not in the environment', () => {
    const redactor = new Redactor([]);
    const out = redactor.text(
      'DefaultEndpointsProtocol=http;AccountName=dev;AccountKey=abc123==;BlobEndpoint=x https://h/c?sv=1&sig=SIGNATURE&se=2 X-Amz-Signature=deadbeef',
    );
    expect(out).not.toMatch(/abc123|SIGNATURE|deadbeef/);
    expect(out).toContain(`AccountKey=${REDACTED}`);
    expect(out).toContain('AccountName=dev');
  });
  it('redacts inside structured values', () => {
    const redactor = new Redactor(['hunter22']);
    expect(redactor.value({ a: ['x hunter22 y'] })).toEqual({ a: [`x ${REDACTED} y`] });
  });
});
