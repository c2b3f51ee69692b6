import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ListenError, listen } from '@switchyard/service';

describe('listen', () => {
  it('resolves with the bound address; port 0 picks a free one', async () => {
    const server = http.createServer();
    const address = await listen(server, { host: '127.0.0.1', port: 0 });
    assert.ok(address.port > 0);
    server.close();
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
});
