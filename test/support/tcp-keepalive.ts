// Whether a listener turned TCP keepalive on for a connection it accepted.
// Node offers no getsockopt; Linux shows each socket's pending timer in
// /proc/net/tcp, and an idle established socket has one (`02`, due in the
// keepalive delay) only when keepalive is on. Tests skip where the file is
// missing (see tcpTimersMissing).
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { SERVER_TCP_KEEP_ALIVE_DELAY_MS } from '@switchyard/service';
import { until } from './processes.ts';

const PROC_NET_TCP = '/proc/net/tcp';
/** /proc/net/tcp gives timers in clock ticks of USER_HZ, 100 per second on Linux. */
const TICKS_PER_S = 100;

/** A skip reason where this system shows no socket timers, else false. */
export const tcpTimersMissing: string | false = existsSync(PROC_NET_TCP) ? false : 'no /proc/net/tcp';

/**
 * The timer of the established socket from `local` to `remote` (ports on
 * 127.0.0.1), as `tr:when`, once it is idle: none while its retransmit timer
 * (`01`) says data it sent is not yet acknowledged.
 */
export function timerOf(localPort: number, remotePort: number): string | undefined {
  const hex = (port: number): string => `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  for (const line of readFileSync(PROC_NET_TCP, 'utf8').split('\n').slice(1)) {
    const [, local, remote, state, , timer] = line.trim().split(/\s+/);
    if (local === hex(localPort) && remote === hex(remotePort) && state === '01') {
      return timer?.startsWith('01:') ? undefined : timer;
    }
  }
  return undefined;
}

/**
 * Asserts that the listener on `port` probes the connection to it from
 * `clientPort` once idle: its side has a keepalive timer pending, due within
 * SERVER_TCP_KEEP_ALIVE_DELAY_MS. Call it once the connection was answered,
 * so the app has accepted it: the kernel holds one before, without
 * keepalive, until the app takes it and turns it on.
 */
export async function assertProbedWhenIdle(port: number, clientPort: number): Promise<void> {
  const timer = await until('the accepted socket, idle', () => timerOf(port, clientPort), 5_000);
  const [active, when] = timer.split(':') as [string, string];
  assert.equal(active, '02', `keepalive timer pending (00 is none): ${timer}`);
  const dueMs = (parseInt(when, 16) / TICKS_PER_S) * 1000;
  assert.ok(dueMs <= SERVER_TCP_KEEP_ALIVE_DELAY_MS, `due in ${dueMs} ms`);
  assert.ok(dueMs > SERVER_TCP_KEEP_ALIVE_DELAY_MS - 10_000, `due in ${dueMs} ms`);
}
