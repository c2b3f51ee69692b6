import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { LISTEN_BACKLOG, ListenError, listen } from '@switchyard/service';

/** The accept-queue limit of the TCP listener on `port`, as `ss` reports it (Send-Q of a listening socket), or a reason it cannot be read. */
function acceptQueueLimit(port: number): number | string {
  if (process.platform !== 'linux') return 'reads the listen queue with ss, on Linux';
  try {
    const line = execFileSync('ss', ['-Hltn', `sport = :${port}`], { encoding: 'utf8' }).trim();
    return Number(line.split(/\s+/)[2]);
  } catch (error) {
    return `ss (iproute2) is not available: ${(error as Error).message}`;
  }
}

describe('listen', () => {
  it('resolves with the bound address; port 0 picks a free one', async () => {
    const server = http.createServer();
    const address = await listen(server, { host: '127.0.0.1', port: 0 });
    assert.ok(address.port > 0);
    server.close();
  });

  it('asks the kernel for a deep accept queue, so a burst of connections is not dropped or reset', async (t) => {
    const server = http.createServer();
    const { port } = await listen(server, { host: '127.0.0.1', port: 0 });
    try {
      const limit = acceptQueueLimit(port);
      if (typeof limit === 'string') return t.skip(limit);
      // Node's own default would be 511; the kernel caps what is asked at somaxconn.
      const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
      assert.equal(limit, Math.min(LISTEN_BACKLOG, somaxconn));
    } finally {
      server.close();
    }
  });

  it('rejects a taken port with a ListenError naming the address, keeping the system code and cause', async () => {
    const holder = http.createServer().listen(0, '127.0.0.1');
    await once(holder, 'listening');
    const { port } = holder.address() as AddressInfo;
    const server = http.createServer();
    try {
      await assert.rejects(listen(server, { host: '127.0.0.1', port }), (error: unknown) => {
        assert.ok(error instanceof ListenError);
        assert.equal(error.message, `cannot listen on 127.0.0.1:${port}: the port is already in use`);
        assert.equal(error.code, 'EADDRINUSE');
        assert.equal(error.port, port);
        assert.equal((error.cause as NodeJS.ErrnoException).code, 'EADDRINUSE');
        return true;
      });
    } finally {
      holder.close();
    }
  });

  it('names an IPv6 address in brackets, so its port is not read as part of it', async () => {
    // fd00::dead:7070 would itself be an address; this one is not on this machine.
    await assert.rejects(listen(http.createServer(), { host: 'fd00::dead', port: 7070 }), (error: unknown) => {
      assert.ok(error instanceof ListenError);
      // The reason is the system's: no such address here, or no IPv6 at all in a container without it.
      assert.match(error.message, /^cannot listen on \[fd00::dead\]:7070: /);
      assert.equal(error.host, 'fd00::dead');
      return true;
    });
  });
});
