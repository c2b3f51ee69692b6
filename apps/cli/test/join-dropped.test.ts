// `switchyard runtime join` at a URL where something takes the tunnel's
// upgrade and hangs up at once (a proxy that passes the upgrade nowhere, a
// server that is no scheduler): a tunnel that came up is not a join. Only a
// scheduler that took the runtime opens its /watch, so until one has, the
// command gives up after --wait-seconds as it does at an unreachable URL.
import { createServer } from 'node:http';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { acceptUpgradeAndHangUp, listening, runCli, type Listening } from './support.ts';

const JOIN_TOKEN = 'join-token-0123456789abcdef';

/** Answers every upgrade (the tunnel's own, or WebSocket) with a valid 101, then closes the connection. */
function startHangingUp(): Promise<Listening> {
  const server = createServer((_req, res) => res.writeHead(404).end());
  server.on('upgrade', acceptUpgradeAndHangUp);
  return listening(server);
}

describe('switchyard runtime join, at a URL that takes the tunnel and drops it', () => {
  let front: Awaited<ReturnType<typeof startHangingUp>>;
  before(async () => {
    front = await startHangingUp();
  });
  after(() => front?.close());

  it('does not count as joined, and gives up after --wait-seconds saying the tunnel was dropped', async () => {
    const args = ['runtime', 'join', front.url, '--token', JOIN_TOKEN, '--id', 'rt-0', '--wait-seconds', '1'];
    const { code, stderr } = await runCli(args, 10_000);
    assert.equal(code, 1, `ended by itself, exit code 1:\n${stderr}`);
    assert.doesNotMatch(stderr, / joined /);
    assert.match(
      stderr.trimEnd().split('\n').at(-1)!,
      /^switchyard: gave up dialling http:\/\/127\.0\.0\.1:\d+ after 1 s: the tunnel was dropped before a scheduler used it \(.+\); check <scheduler-url>, or wait longer with --wait-seconds$/,
    );
  });
});
