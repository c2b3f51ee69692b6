// `switchyard up` on a machine where a port it needs is taken: one line says
// which address and which flag moves it, and the command exits 1 without
// printing the cluster as ready.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { runCli } from './support.ts';

describe('switchyard up with a taken port', () => {
  let holder: net.Server;
  let taken = 0;
  before(async () => {
    holder = net.createServer().listen(0, '127.0.0.1');
    await once(holder, 'listening');
    taken = (holder.address() as net.AddressInfo).port;
  });
  after(() => new Promise((resolve) => holder.close(resolve)));

  const cases = [
    { port: 'gateway', args: () => ['--gateway-port', String(taken), '--scheduler-port', '0'], flag: '--gateway-port' },
    {
      port: 'first scheduler',
      args: () => ['--gateway-port', '0', '--scheduler-port', String(taken)],
      flag: '--scheduler-port',
    },
  ];
  for (const c of cases) {
    it(`names the address and ${c.flag} when the ${c.port} port is taken, and exits 1`, async () => {
      const { code, stdout, stderr } = await runCli(['up', ...c.args()], 30_000);
      assert.equal(code, 1, stderr);
      const line = `switchyard: cannot listen on 127.0.0.1:${taken}: the port is already in use; choose another with ${c.flag} <port> (0 picks free ports)`;
      assert.ok(stderr.split('\n').includes(line), stderr);
      assert.doesNotMatch(stdout, /Switchyard is ready/);
    });
  }
});
