// How long the gateway binary holds a client connection that never finishes
// what it must send first: its request's headers (trickled a byte at a time)
// or nothing at all, or, over TLS, its handshake. Each is closed at the
// gateway's headers deadline (headersTimeoutMs, 5 s here), not at Node's next
// check of it (every 30 s by default) nor at Node's TLS handshake default (120 s).
// Gateway processes, plain and TLS, whose scheduler is never reached; raw
// sockets on loopback.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { certificateFor127 } from '@switchyard/service/testing';
import { heldFor, trickle } from './raw-connections.ts';
import { spawnApp, type AppProcess } from '../support/processes.ts';

/** The gateway's deadline for a request's headers, and for a TLS handshake (its default is 30 s). */
const DEADLINE_MS = 5_000;
/** Leeway for a loaded machine; Node's default check interval alone would add up to 30 s. */
const SLACK_MS = 4_000;
const certificate = certificateFor127();

/** A POST /mcp header block, a byte every second, never its end. */
const trickleHeaders = trickle(
  `POST /mcp HTTP/1.1
Host: x
Content-Type: application/json
X-Pad: ${'a'.repeat(100)}`,
);

describe('the gateway binary and clients that never finish their start', () => {
  let plain: AppProcess;
  let secure: AppProcess | undefined;
  let dir: string | undefined;

  before(async () => {
    const args = [
      ...['--host', '127.0.0.1', '--port', '0', '--schedulers', 'http://127.0.0.1:9', '--drain-delay-ms', '0'],
      ...['--headers-timeout-ms', String(DEADLINE_MS)],
    ];
    plain = await spawnApp('gateway', 'gw-slow-headers', args);
    if ('missing' in certificate) return;
    dir = mkdtempSync(join(tmpdir(), 'switchyard-gateway-slow-headers-'));
    writeFileSync(join(dir, 'tls.crt'), certificate.cert);
    writeFileSync(join(dir, 'tls.key'), certificate.key);
    const tlsArgs = ['--tls.cert-file', join(dir, 'tls.crt'), '--tls.key-file', join(dir, 'tls.key')];
    secure = await spawnApp('gateway', 'gw-slow-handshake', [...args, ...tlsArgs]);
  });
  after(async () => {
    await Promise.all([plain.stop(), secure?.stop()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('closes one trickling its headers or sending nothing at the deadline, and over TLS one that never starts its handshake', async (t) => {
    const limitMs = DEADLINE_MS + SLACK_MS;
    const [headersMs, silentMs, handshakeMs] = await Promise.all([
      heldFor('trickling', plain.port!, trickleHeaders, limitMs),
      heldFor('silent', plain.port!, () => () => {}, limitMs),
      secure ? heldFor('TLS, silent', secure.port!, () => () => {}, limitMs) : undefined,
    ]);
    assert.ok(headersMs >= DEADLINE_MS - 100, `closed after ${headersMs} ms, before the deadline`);
    assert.ok(silentMs >= DEADLINE_MS - 100, `a silent one closed after ${silentMs} ms, before the deadline`);
    if (handshakeMs === undefined) return t.skip('missing' in certificate ? certificate.missing : 'no TLS gateway');
    assert.ok(handshakeMs >= DEADLINE_MS - 100, `closed after ${handshakeMs} ms, before the deadline`);
  });
});
