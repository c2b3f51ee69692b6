import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { join } from 'node:path';
import type { CarrierTransport } from '../src/index.ts';
import { TOKEN, httpRequest, startScheduler } from './helpers.ts';
import type { Scheduler } from './helpers.ts';

const PING_INTERVAL_MS = 300;
const FIXTURE = join(import.meta.dirname, 'fixtures', 'runtime.ts');

/** Starts the fixture runtime in a child process and waits until the scheduler holds its tunnel. */
async function spawnRuntime(scheduler: Scheduler, id: string, transport: CarrierTransport): Promise<ChildProcess> {
  const accepted = scheduler.nextTunnel(id);
  const child = spawn(process.execPath, [FIXTURE, scheduler.url, TOKEN, id, String(PING_INTERVAL_MS), transport], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await accepted;
  return child;
}

/** Opens a proxied request to `/hang` and resolves once its first body chunk arrived; `ended` settles when it stops. */
async function hangingProxyRequest(url: string): Promise<{ ended: Promise<string> }> {
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    http.get(url, { agent: false }, resolve).once('error', reject);
  });
  assert.equal(res.statusCode, 200);
  const [first] = (await once(res, 'data')) as [Buffer];
  assert.equal(first.toString(), 'started');
  const ended = new Promise<string>((resolve) => {
    res.once('end', () => resolve('end'));
    res.once('aborted', () => resolve('aborted'));
    res.once('error', () => resolve('error'));
    res.once('close', () => resolve('close'));
  });
  return { ended };
}

describe('tunnel liveness against a runtime process', () => {
  let scheduler: Scheduler;
  const children: ChildProcess[] = [];
  before(async () => {
    scheduler = await startScheduler({ pingIntervalMs: PING_INTERVAL_MS });
  });
  after(async () => {
    for (const child of children) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
    await scheduler.close();
  });

  const cases = [
    {
      name: 'kill -9 fails in-flight requests promptly and the proxy then answers 502',
      signal: 'SIGKILL' as const,
      reason: /./,
    },
    {
      name: 'a SIGSTOPped runtime (no FIN) is detected by ping within three intervals',
      signal: 'SIGSTOP' as const,
      reason: /no ping answer/,
    },
  ];
  const transports: CarrierTransport[] = ['http2', 'websocket'];
  for (const [c, transport] of cases.flatMap((c) => transports.map((t) => [c, t] as const))) {
    it(`${c.name} (${transport})`, async () => {
      const id = `rt-${c.signal.toLowerCase()}-${transport}`;
      const child = await spawnRuntime(scheduler, id, transport);
      assert.equal(scheduler.endpoint.get(id)?.transport, transport);
      children.push(child);
      const tunnel = scheduler.endpoint.get(id)!;
      assert.equal(await (await tunnel.fetch('http://runtime/hello')).text(), `hello from ${id}`);
      const rttDeadline = performance.now() + 10 * PING_INTERVAL_MS;
      while (tunnel.rttMs === undefined && performance.now() < rttDeadline) await new Promise((r) => setTimeout(r, 20));
      assert.ok(tunnel.rttMs !== undefined && tunnel.rttMs >= 0, 'rttMs is measured by the pings');
      assert.ok(tunnel.minRttMs !== undefined && tunnel.minRttMs <= tunnel.rttMs, 'minRttMs is the least of them');
      await new Promise((r) => setTimeout(r, 3 * PING_INTERVAL_MS));
      assert.equal(tunnel.peerQuiet, false, "the runtime's own pings keep coming");
      const proxied = await hangingProxyRequest(`${scheduler.url}/proxy/${id}/hang`);
      // Unanswered when the runtime goes: the 502 says it went, not that it refused this request.
      const streamsBefore = tunnel.session.state.nextStreamID ?? 0;
      const unanswered = httpRequest(`${scheduler.url}/proxy/${id}/silent`);
      // Stream ids of a client go up by two: the proxy has opened its stream.
      while ((tunnel.session.state.nextStreamID ?? 0) <= streamsBefore) await new Promise((r) => setTimeout(r, 5));
      const direct = await tunnel.fetch('http://runtime/hang');
      const reader = direct.body!.getReader();
      await reader.read();
      const directFailed = reader.read().then(
        () => 'no error',
        () => 'error',
      );

      const killedAt = performance.now();
      child.kill(c.signal);
      const reason = await tunnel.whenClosed;
      const detectedMs = performance.now() - killedAt;
      assert.match(reason, c.reason);
      if (c.signal === 'SIGSTOP') {
        // Silent: the runtime announced pings every 300 ms (300 ms timeout), its last one came up to one
        // interval before the stop, so a living runtime in its place would notice within 600 ms of that.
        const noticesInMs = tunnel.peerNoticesBy! - killedAt; // both monotonic readings of the system clock
        assert.ok(noticesInMs > 0 && noticesInMs <= 2 * PING_INTERVAL_MS + 20, `peer notices in ${noticesInMs} ms`);
      } else {
        assert.equal(tunnel.peerNoticesBy, undefined, 'a connection that closed is no silence to wait out');
      }
      assert.ok(detectedMs < 3 * PING_INTERVAL_MS, `dropped after ${detectedMs.toFixed(0)} ms (${reason})`);
      assert.notEqual(await proxied.ended, 'end', 'the proxied response must not look complete');
      assert.equal(await directFailed, 'error');
      const refused = await unanswered;
      assert.equal(refused.status, 502);
      assert.deepEqual(JSON.parse(refused.body), { error: 'runtime not connected', runtime: id });
      const failedMs = performance.now() - killedAt;
      assert.ok(failedMs < 3 * PING_INTERVAL_MS + 200, `in-flight requests failed after ${failedMs.toFixed(0)} ms`);
      assert.equal(scheduler.endpoint.get(id), undefined);
      assert.throws(() => tunnel.request({ ':path': '/hello' }), { code: 'upstream_unavailable' });
      const after502 = await httpRequest(`${scheduler.url}/proxy/${id}/hello`);
      assert.equal(after502.status, 502);
      assert.deepEqual(JSON.parse(after502.body), { error: 'runtime not connected', runtime: id });
    });
  }
});
