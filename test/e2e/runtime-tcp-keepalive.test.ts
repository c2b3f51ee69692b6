// The runtime binary turns TCP keepalive on for every connection its direct
// listener (the one gateways in direct mode dial) accepts: a gateway whose
// host vanished without a FIN would otherwise keep its streams, and the
// sessions' streams they hold here, for as long as nothing is written to
// them. A runtime whose scheduler is never reached; read in the socket's
// timer (see test/support/tcp-keepalive.ts).
import { once } from 'node:events';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { spawnApp, type AppProcess } from '../support/processes.ts';
import { assertProbedWhenIdle, tcpTimersMissing } from '../support/tcp-keepalive.ts';

const DIRECT_TOKEN = 'a-direct-token-0123456789abcdef';

describe('the runtime binary and TCP keepalive', { skip: tcpTimersMissing }, () => {
  let runtime: AppProcess;
  let directPort: number;
  before(async () => {
    runtime = await spawnApp('runtime', 'rt-keepalive', [
      ...['--runtime-id', 'rt-keepalive', '--scheduler-url', 'http://127.0.0.1:1'],
      ...['--join-token', 'a-join-token-0123456789abcdef', '--drain-delay-ms', '0'],
      ...['--direct-listen.enabled', 'true', '--direct-listen.host', '127.0.0.1', '--direct-listen.port', '0'],
      ...['--direct-listen.token', DIRECT_TOKEN],
    ]);
    const ready = await runtime.waitForLog((l) => l.msg === 'ready');
    directPort = Number(new URL(String(ready.direct)).port);
  });
  after(() => runtime?.stop());

  it('probes an idle connection its direct listener accepted after SERVER_TCP_KEEP_ALIVE_DELAY_MS', async () => {
    const socket = net.connect(directPort, '127.0.0.1');
    socket.on('error', () => {});
    try {
      const answered = once(socket, 'data');
      socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${DIRECT_TOKEN}\r\n\r\n`);
      await answered;
      await assertProbedWhenIdle(directPort, socket.localPort!);
    } finally {
      socket.destroy();
    }
  });
});
