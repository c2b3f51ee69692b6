/**
 * A runtime's liveness timing, as it announces it when it dials
 * (`X-Runtime-Liveness`). Each end of a tunnel pings the other on its own
 * schedule, so when the connection goes silent (a NAT or firewall in between
 * forgets it) the two find out at different times. A replica that finds out
 * first uses this to know how long a runtime that lives may take to find out
 * as well, and dial again.
 */
export interface Liveness {
  readonly pingIntervalMs: number;
  readonly pingTimeoutMs: number;
}

/** Announced values above this are not believed (the header is a hint; garbage must not hold requests for hours). */
const ANNOUNCED_MS_MAX = 10 * 60_000;

/** How long past its last ping a replica waits at most for a silent runtime to notice; bounds what a runtime can ask. */
export const PEER_NOTICE_WAIT_MAX_MS = 60_000;

export function livenessHeaderValue(liveness: Liveness): string {
  return `ping-interval-ms=${liveness.pingIntervalMs}, ping-timeout-ms=${liveness.pingTimeoutMs}`;
}

/**
 * Reads an announced timing; undefined when absent or malformed (a runtime
 * that announces nothing is treated as before it could: not waited for).
 */
export function parseLiveness(value: string | string[] | undefined): Liveness | undefined {
  if (typeof value !== 'string') return undefined;
  const fields = new Map<string, number>();
  for (const part of value.split(',')) {
    const match = /^\s*([a-z-]+)=(\d{1,9})\s*$/.exec(part);
    if (!match) return undefined;
    fields.set(match[1]!, Number(match[2]));
  }
  const pingIntervalMs = fields.get('ping-interval-ms');
  const pingTimeoutMs = fields.get('ping-timeout-ms');
  const valid = (ms: number | undefined): ms is number => ms !== undefined && ms > 0 && ms <= ANNOUNCED_MS_MAX;
  return valid(pingIntervalMs) && valid(pingTimeoutMs) ? { pingIntervalMs, pingTimeoutMs } : undefined;
}

/**
 * The latest time at which a runtime that lives finds its silent connection
 * dead, given when its last ping arrived here: its next probe goes out one
 * interval after that one's answer and is given up one timeout later.
 */
export function noticeDeadline(lastPeerPingAt: number, liveness: Liveness): number {
  return lastPeerPingAt + Math.min(liveness.pingIntervalMs + liveness.pingTimeoutMs, PEER_NOTICE_WAIT_MAX_MS);
}
