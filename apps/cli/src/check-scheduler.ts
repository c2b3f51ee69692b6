/**
 * `switchyard check scheduler`: whether the replicas of a cluster answer and
 * agree on one leader, term and epoch, for a chart's `helm test` and for
 * scripts. It reads `/api/epoch` from the Service and from each replica
 * named, and passes once every answer names the same leader and term, holds
 * the same epoch, and was reached by that leader lately. An election or a
 * commit in progress settles within seconds, so disagreement is read again
 * for a while; a replica that cannot be reached fails at once.
 * Not checked: runtimes (a cluster may have none yet), or replicas not named.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { readEpochLine, type EpochLine } from './answers.ts';
import { EPOCH_STALE_MS, getJson, type SchedulerTarget } from './inspect.ts';
import { printable } from './log-lines.ts';

export interface SchedulerCheck {
  /** The URL most clients use (a Service); read like a replica. */
  readonly url: string;
  /** Each replica's own URL (in Kubernetes, its name under the headless peer Service). */
  readonly replicas: readonly string[];
  readonly token?: string;
  /** How long disagreement is read again before the check fails. */
  readonly waitMs: number;
}

/** One answer of `/api/epoch`, with where it came from. */
export interface ReplicaView {
  readonly url: string;
  readonly line: EpochLine;
}

export type Verdict =
  { readonly ok: true; readonly summary: string } | { readonly ok: false; readonly problem: string };

/** Reads apart: disagreement is read again at this pace while the wait lasts. */
const READ_INTERVAL_MS = 1000;
/** A refused connection in a check is a replica or Service down, not a missing local cluster. */
const REFUSED_HINT = 'nothing listens there';

const who = (view: ReplicaView): string => printable(view.url);

/** What splits `views` by `key`, as "a (url, url), b (url)"; undefined when they agree. */
function split(views: readonly ReplicaView[], key: (view: ReplicaView) => string): string | undefined {
  const groups = new Map<string, string[]>();
  for (const view of views) groups.set(key(view), [...(groups.get(key(view)) ?? []), who(view)]);
  if (groups.size < 2) return undefined;
  return [...groups].map(([value, urls]) => `${printable(value)} (${urls.join(', ')})`).join(', ');
}

/** Whether the answers agree, or the first thing wrong with them. Pure: the same views give the same verdict. */
export function schedulerVerdict(views: readonly ReplicaView[]): Verdict {
  for (const view of views) {
    const { line } = view;
    if (!line.leader) return { ok: false, problem: `${who(view)} knows no leader` };
    if (line.epoch === null) return { ok: false, problem: `${who(view)} holds no epoch yet` };
    if (typeof line.epochAgeMs === 'number' && line.epochAgeMs > EPOCH_STALE_MS) {
      const seconds = Math.round(line.epochAgeMs / 1000);
      return { ok: false, problem: `no leader has reached ${who(view)} for ${seconds} s` };
    }
  }
  // By id and URL: two clusters each led by its own s0 do not agree.
  const leaders = split(views, (v) => `${v.line.leader!.id} (${v.line.leader!.url})`);
  if (leaders) return { ok: false, problem: `the replicas name different leaders: ${leaders}` };
  const terms = split(views, (v) => String(v.line.term));
  if (terms) return { ok: false, problem: `the replicas are in different terms: ${terms}` };
  const epochs = split(views, (v) => String(v.line.epoch));
  if (epochs) return { ok: false, problem: `the replicas hold different epochs: ${epochs}` };
  const { leader, term, epoch } = views[0]!.line;
  return {
    ok: true,
    summary: printable(`leader ${leader!.id} (${leader!.url}), term ${term}, epoch ${epoch}`),
  };
}

/**
 * Resolves with a line saying what agreed; rejects with what did not, or
 * with what could not be reached. Bounded: at most one read of every URL
 * per second for `waitMs`, each read bounded by its own timeout.
 */
export async function checkScheduler(check: SchedulerCheck): Promise<string> {
  const urls = [check.url, ...check.replicas];
  const target = (url: string): SchedulerTarget => ({
    url,
    ...(check.token !== undefined ? { token: check.token } : {}),
  });
  const reads = Math.floor(check.waitMs / READ_INTERVAL_MS) + 1;
  for (let read = 1; ; read++) {
    const views = await Promise.all(
      urls.map(async (url) => {
        const { body } = await getJson(target(url), '/api/epoch', [200], readEpochLine, {}, REFUSED_HINT);
        return { url, line: body };
      }),
    );
    const verdict = schedulerVerdict(views);
    if (verdict.ok) return passedLine(verdict.summary, check.replicas.length, check.url);
    if (read >= reads) {
      throw new Error(
        `the scheduler replicas did not agree within ${Math.round(check.waitMs / 1000)} s: ${verdict.problem}`,
      );
    }
    await delay(READ_INTERVAL_MS);
  }
}

/** What a passed check prints: what agreed, and where it was read (no replica named: the one URL only). */
export function passedLine(summary: string, replicas: number, url: string): string {
  const on = replicas === 0 ? '' : replicas === 1 ? ' on 1 replica and' : ` on ${replicas} replicas and`;
  return `scheduler ok: ${summary},${on} through ${printable(url)}`;
}
