import type { LogEntry } from './log-lines.ts';

/**
 * The reason a scheduler's JSON error body gives (`{"error", "detail"}`,
 * docs/protocol.md §1): the error, with the detail that names the field and
 * the rule it broke, if any. Undefined for any other body (a proxy's page).
 */
export function schedulerReason(body: string | undefined): string | undefined {
  try {
    const parsed = JSON.parse(body ?? '') as { error?: unknown; detail?: unknown };
    if (typeof parsed.error === 'string') {
      return typeof parsed.detail === 'string' ? `${parsed.error} (${parsed.detail})` : parsed.error;
    }
  } catch {
    // Not JSON.
  }
  return undefined;
}

/** What a refusal's body (as the dialer logs it) says is wrong: the scheduler's reason, or a proxy's page as it came. */
function refusalReason(body: string | undefined): string {
  return schedulerReason(body) ?? (body?.trim() || '(no reason given)');
}

/** The runtime id a 403's body (`{"error","runtime"}`) names, if it names one. */
function refusedId(body: string | undefined): string | undefined {
  try {
    const { runtime } = JSON.parse(body ?? '') as { runtime?: unknown };
    return typeof runtime === 'string' ? runtime : undefined;
  } catch {
    return undefined;
  }
}

/** The 409 body's `error` for an id that another runtime that runs holds (docs/protocol.md §1). */
const HELD_BY_LIVE_RUNTIME = 'runtime id held by another live runtime';

/** An id another runtime that runs holds, as a 409 says it. */
export interface HeldId {
  readonly id: string;
  /** How soon the holder's tunnel is dropped should that runtime stay silent (gone), if the scheduler says. */
  readonly droppedIfSilentInMs?: number;
}

/**
 * What a refusal entry says of the runtime id another runtime that runs holds (a 409 whose body says so),
 * or undefined for any other entry.
 */
export function idHeldByLiveRuntime(entry: LogEntry): HeldId | undefined {
  if (entry.status !== 409) return undefined;
  try {
    const { error, runtime, droppedIfSilentInMs } = JSON.parse(entry.body ?? '') as {
      error?: unknown;
      runtime?: unknown;
      droppedIfSilentInMs?: unknown;
    };
    if (error !== HELD_BY_LIVE_RUNTIME || typeof runtime !== 'string') return undefined;
    // A scheduler of an earlier release, or one holding the id's tunnel elsewhere, may not say.
    const known = typeof droppedIfSilentInMs === 'number' && Number.isFinite(droppedIfSilentInMs);
    return { id: runtime, ...(known && droppedIfSilentInMs >= 0 ? { droppedIfSilentInMs } : {}) };
  } catch {
    return undefined;
  }
}

/**
 * Answers to the connect request that a scheduler never gives: whatever
 * answered (a gateway, a scheduler's page, any web server) will never take
 * the tunnel. A proxy's 502 or 504 is not among them: its scheduler may be
 * back soon.
 */
function noScheduler(status: number): boolean {
  return status < 400 || status === 404 || status === 405;
}

/** The connect path the dialer asked, from the URL it logs with a refusal. */
function pathOf(url: string | undefined): string {
  return url !== undefined && URL.canParse(url) ? new URL(url).pathname : '/api/runtime/connect';
}

/**
 * The line that ends `runtime join` (exit 1) for a refusal that retrying
 * will not heal, or undefined for any other log entry. `tokenSource` is
 * where the join token came from: the line names it, never the token.
 */
export function lastingRefusal(entry: LogEntry, schedulerUrl: string, tokenSource: string): string | undefined {
  // The dialer appends a hint to the message for some statuses (a 403's, a 409's).
  if (!entry.msg?.startsWith('scheduler refused the tunnel') || entry.status === undefined) return undefined;
  if (entry.status === 401) return `${schedulerUrl} refused the join token (check ${tokenSource})`;
  if (entry.status === 400) return `${schedulerUrl} refused this runtime: ${refusalReason(entry.body)}`;
  // A token scoped to id patterns (`<token> gpu-*`) that this id is not one of: no redial changes that.
  // (A scheduler's 403 names the id; one from a firewall or proxy in front does not, and is shown as it came.)
  if (entry.status === 403) {
    const id = refusedId(entry.body);
    if (id === undefined) return `${schedulerUrl} refused this runtime (HTTP 403): ${refusalReason(entry.body)}`;
    return (
      `${schedulerUrl} refused runtime id ${id}: the join token (${tokenSource}) admits other ids; ` +
      'pass an --id it admits, or a token for this one'
    );
  }
  if (noScheduler(entry.status)) {
    return (
      `${schedulerUrl} does not answer as a Switchyard scheduler (HTTP ${entry.status} to ${pathOf(entry.url)}): ` +
      'pass a scheduler replica or its Service as <scheduler-url>'
    );
  }
  return undefined;
}
