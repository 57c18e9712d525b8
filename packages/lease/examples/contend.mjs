// Two processes race for one lease: exactly one holds it.
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ForeignActiveError, holdLease, newInstanceId } from '@x/lease';
import { FsStore } from '@x/store';

const store = new FsStore({ root: process.env.LEASE_DIR ?? join(tmpdir(), 'lease-example') });
const prefix = 'jobs/contended';

if (process.argv[2] === 'contender') {
  const tell = (message) => new Promise((resolve) => process.send(message, resolve));
  try {
    const keeper = await holdLease(store, { prefix, instanceId: newInstanceId() });
    await tell({ held: true, generation: keeper.generation });
    await once(process, 'message'); // hold it until the parent has heard from both
    await keeper.release();
  } catch (error) {
    if (!ForeignActiveError.isInstance(error)) throw error;
    await tell({ held: false, holder: error.holder.pid });
  }
  process.disconnect();
} else {
  const children = [0, 1].map(() => fork(import.meta.filename, ['contender']));
  const exits = children.map((child) => once(child, 'exit'));
  const answers = await Promise.all(children.map((child) => once(child, 'message')));
  for (const [index, [answer]] of answers.entries())
    console.log(
      `process ${children[index].pid}: ${answer.held ? `holds it (generation ${answer.generation})` : `refused, held by pid ${answer.holder}`}`,
    );
  for (const [index, [answer]] of answers.entries())
    if (answer.held) children[index].send('release');
  const codes = (await Promise.all(exits)).map(([code]) => code);
  const holders = answers.filter(([answer]) => answer.held).length;
  if (holders !== 1 || codes.some((code) => code !== 0)) {
    console.error(`expected exactly one holder, got ${holders}; exit codes ${codes.join(', ')}`);
    process.exitCode = 1;
  } else console.log('exactly one of two processes held the lease');
}
