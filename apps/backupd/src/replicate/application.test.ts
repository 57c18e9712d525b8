import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { EXIT_FAILED } from '../exit-codes.ts';
import { type Application, applicationExitCode, startApplication } from './application.ts';

function exited(application: Application): Promise<number> {
  return new Promise((resolve) =>
    application.on('exit', (code, signal) => resolve(applicationExitCode(code, signal))),
  );
}

describe('applicationExitCode', () => {
  it('is the exit code, 128 + the signal number when a signal ended it, 1 when neither is known', () => {
    expect(applicationExitCode(0, null)).toBe(0);
    expect(applicationExitCode(7, null)).toBe(7);
    expect(applicationExitCode(null, 'SIGTERM')).toBe(143);
    expect(applicationExitCode(null, 'SIGINT')).toBe(130);
    expect(applicationExitCode(null, 'SIGKILL')).toBe(137);
    expect(applicationExitCode(null, 'SIGHUP')).toBe(129);
    expect(applicationExitCode(null, 'SIGUSR1')).toBe(129);
    expect(applicationExitCode(null, null)).toBe(EXIT_FAILED);
  });
});

describe('startApplication', () => {
  it('runs the command through sh -c "exec …", so a signal reaches the application itself', async () => {
    // Were the shell kept around the application, SIGTERM would end the shell
    // and `sleep` would not see it; with exec, the child backupd signals is sleep.
    const application = startApplication('sleep 30');
    const code = exited(application);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(readFileSync(`/proc/${application.pid}/comm`, 'utf8').trim()).toBe('sleep');
    application.kill('SIGTERM');
    expect(await code).toBe(143);
  });

  it('passes the command to the shell whole: its words and its exit code', async () => {
    const application = startApplication('sh -c "exit 7"');
    expect(await exited(application)).toBe(7);
  });
});
