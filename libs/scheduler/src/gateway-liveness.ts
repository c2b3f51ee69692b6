import type http2 from 'node:http2';
import { Heartbeat, type Clock } from '@switchyard/clock';
import { probeSession } from '@switchyard/tunnel';
import type { ReplicaLogger } from './options.ts';

/**
 * Liveness of the HTTP/2 connections gateways hold here (milliseconds). The
 * gateway pings its end every 10 s and gives up at the next round (within
 * 10–20 s); this end is as quick: a connection is pinged 10 s after its
 * last answer, and destroyed when a ping is unanswered 10 s later.
 */
export const GATEWAY_PING_DEFAULTS = {
  intervalMs: 10_000,
  timeoutMs: 10_000,
} as const;

/**
 * Pings `session` (a gateway's HTTP/2 connection) every `intervalMs` and
 * destroys it when a ping is unanswered after `timeoutMs`, so a gateway
 * that vanished without a reset (host down, network partition) is found
 * within `intervalMs + timeoutMs`. Its event streams carry a keep-alive
 * comment every 15 s, so TCP keepalive never probes them, and only the
 * kernel's retransmission timeout (about 15 minutes) would end the
 * connection; until then each stream holds a stream of a runtime's tunnel,
 * and the runtime a session's stream. Destroyed, every stream of the
 * session errors and resets its tunnel stream (CANCEL). Pings while the
 * connection carries no stream too: they cost a frame each way, and an
 * idle connection of a vanished gateway goes sooner than its idle timeout.
 * `onUnanswered` is told of each connection closed for an unanswered ping.
 */
export function keepGatewayChecked(
  session: http2.ServerHttp2Session,
  options: { clock: Clock; intervalMs: number; timeoutMs: number; logger: ReplicaLogger; onUnanswered: () => void },
): void {
  // Read now: a destroyed session has no socket left to name its peer.
  const peer = `${session.socket?.remoteAddress}:${session.socket?.remotePort}`;
  const heartbeat = new Heartbeat({
    clock: options.clock,
    intervalMs: options.intervalMs,
    timeoutMs: options.timeoutMs,
    probe: () => probeSession(session),
    onRtt: () => {},
    onDead: (reason, cause) => {
      // A failed ping is the session already going (closed or destroyed), which says so itself.
      if (cause === 'unanswered') {
        options.onUnanswered();
        options.logger.warn({ peer, reason }, 'gateway connection stopped answering HTTP/2 pings; closed its streams');
      }
      if (session.destroyed) return;
      const error = Object.assign(new Error(`gateway at ${peer}: ${reason}`), { code: 'ERR_HTTP2_PING_TIMEOUT' });
      session.destroy(error);
    },
  });
  session.once('close', () => heartbeat.stop());
}
