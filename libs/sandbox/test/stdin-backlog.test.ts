// A stdio server that stops reading its stdin: what the runtime sends it
// waits in the runtime's memory, so the transport refuses messages once a
// capped backlog waits, and stops a server that stays stuck. A real child
// (the unruly server, `deaf`) on real pipes; time is a ManualClock.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { JSONRPCMessage } from '@modelcontextprotocol/client';
import { ManualClock } from '@switchyard/clock/testing';
import { ChildTransport, STDIN_BACKLOG_BYTES_MAX, STDIN_STALL_MS, type StdinTrouble } from '../src/child-transport.ts';
import { alive, descendants } from './fixtures/children.ts';

const unruly = new URL('./fixtures/unruly-stdio-server.ts', import.meta.url).pathname;
/** Messages of about 1 MiB: 24 are past the cap by half. */
const TEXT = 'x'.repeat(1024 * 1024);
const MESSAGES = 24;

async function waitFor(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const call = (id: number, text: string): JSONRPCMessage => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name: 'echo', arguments: { text } },
});

/** The deaf server, stopped reading at its first call, and MESSAGES more sent to it. */
async function deafServer() {
  const clock = new ManualClock();
  const troubles: StdinTrouble[] = [];
  let stderr = '';
  const transport = new ChildTransport({
    command: process.execPath,
    args: [unruly, 'deaf'],
    env: { PATH: process.env.PATH ?? '' },
    stderr: (stream) => {
      stream.setEncoding('utf8');
      stream.on('data', (text: string) => void (stderr += text));
    },
    stdinTrouble: (trouble) => void troubles.push(trouble),
    clock,
  });
  let closed = false;
  transport.onclose = () => void (closed = true);
  await transport.start();
  // Its last word before it reads: its SIGUSR2 handler is in place.
  await waitFor('the server to start', () => stderr.includes('unruly: pid'));
  void transport.send(call(0, 'stop reading'));
  const refused: Error[] = [];
  for (let id = 1; id <= MESSAGES; id++) transport.send(call(id, TEXT)).catch((e: Error) => void refused.push(e));
  await new Promise((r) => setImmediate(r));
  return { clock, troubles, transport, refused, closed: () => closed };
}

describe('a stdio server that stops reading its stdin', () => {
  const started: ChildTransport[] = [];
  after(async () => {
    await Promise.all(started.map((t) => t.close()));
    assert.deepEqual(descendants(), [], 'no server is left behind');
  });

  it('has messages past the cap refused at once, so the backlog stays within the cap and one message', async () => {
    const deaf = await deafServer();
    started.push(deaf.transport);
    const oneMessageBytes = JSON.stringify(call(MESSAGES, TEXT)).length + 1;
    assert.ok(
      deaf.transport.stdinBacklogBytes <= STDIN_BACKLOG_BYTES_MAX + oneMessageBytes,
      `${deaf.transport.stdinBacklogBytes} bytes wait on stdin`,
    );
    // Each message in is about 1 MiB, so no more than 17 fit under 16 MiB.
    assert.ok(deaf.refused.length >= MESSAGES - 17, `${deaf.refused.length} of ${MESSAGES} refused`);
    for (const e of deaf.refused) assert.match(e.message, /not reading its input \(16\.\d MiB wait for it\)/);
    assert.equal(deaf.troubles.filter((t) => t === 'refused').length, deaf.refused.length);
    assert.equal(deaf.closed(), false, 'refusing is not stopping');
  });

  it(`stops the server once it took none of its backlog for ${STDIN_STALL_MS / 1000} s`, async () => {
    const deaf = await deafServer();
    started.push(deaf.transport);
    const pid = deaf.transport.pid!;
    await deaf.clock.advance(STDIN_STALL_MS - 1);
    assert.equal(alive(pid), true, 'not stopped before its time');
    await deaf.clock.advance(1);
    assert.deepEqual(deaf.troubles.slice(-1), ['stalled']);
    await waitFor('the server to be stopped', deaf.closed);
    assert.equal(deaf.transport.exit?.signal, 'SIGTERM');
  });

  it('does not stop a server that keeps reading, however slowly', async () => {
    const deaf = await deafServer();
    started.push(deaf.transport);
    const pid = deaf.transport.pid!;
    const backlog = deaf.transport.stdinBacklogBytes;
    process.kill(pid, 'SIGUSR2'); // it takes one chunk
    await waitFor('the server to take some', () => deaf.transport.stdinBacklogBytes < backlog);
    // And the backlog is topped up past the cap again, as calls keep coming.
    for (let id = MESSAGES + 1; id <= MESSAGES + 3; id++) deaf.transport.send(call(id, TEXT)).catch(() => undefined);
    assert.ok(deaf.transport.stdinBacklogBytes > STDIN_BACKLOG_BYTES_MAX);
    await deaf.clock.advance(STDIN_STALL_MS);
    assert.equal(deaf.troubles.includes('stalled'), false, 'it took some: not stuck');
    assert.equal(alive(pid), true);
    // Nothing taken since: now it is stuck.
    await deaf.clock.advance(STDIN_STALL_MS);
    assert.deepEqual(deaf.troubles.slice(-1), ['stalled']);
    await waitFor('the server to be stopped', deaf.closed);
  });
});
