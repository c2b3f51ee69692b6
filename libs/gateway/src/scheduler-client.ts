import type { Dispatcher } from 'undici';
import { SCHEDULER_API_REALM, SwitchyardError, isIdentityValue } from '@switchyard/protocol';
import type { ThrottledLog } from './throttled-log.ts';
import { SCHEDULER_TOKEN_REFUSED, refusedGatewayToken } from './upstream.ts';
import type { ScheduleRequestInput } from '@switchyard/protocol';
import { sleep } from '@switchyard/clock';
import type { Clock, Timer } from '@switchyard/clock';
import { GATEWAY_DEFAULTS } from './options.ts';

/** A placement the gateway can send traffic to. */
export interface Placement {
  readonly runtime: string;
  readonly proxyUrl: string;
  readonly address?: string;
}

export interface SchedulerClientConfig {
  readonly schedulers: readonly string[];
  readonly dispatcher: Dispatcher;
  /** `Authorization` for the schedulers' API (gateway option `schedulerToken`), asked per call. */
  readonly authorization?: () => string | undefined;
  /** Where trouble with a replica is reported (throttled: a replica that is down fails every ask alike). */
  readonly upstreamLog: ThrottledLog;
  readonly clock: Clock;
  readonly timeoutMs: number;
  readonly onLatency?: (seconds: number, outcome: 'ok' | 'unschedulable' | 'error') => void;
  /** An ask went SCHEDULE_HEDGE_MS unanswered and the next replica was asked too. */
  readonly onHedge?: () => void;
}

const RESPONSE_BYTES_MAX = 256 * 1024;

/**
 * `unschedulable` (503) with the scheduler's reason (its `unschedulable.code`,
 * e.g. `no_runtime_for_class`; undefined from a scheduler that gave none),
 * so the answer can say how soon to try again.
 */
export class UnschedulableError extends SwitchyardError {
  readonly reason: string | undefined;
  constructor(message: string, reason: string | undefined) {
    super('unschedulable', message);
    this.reason = reason;
  }
}

/** Outcome of one replica: a decision ends the search, `retry` tries the next replica. */
type Attempt =
  | { kind: 'placed'; placement: Placement }
  | { kind: 'unschedulable'; message: string; reason: string | undefined }
  | { kind: 'retry' };

function placementOf(body: unknown): Placement | undefined {
  const b = body as { ok?: unknown; runtime?: unknown; proxyUrl?: unknown; address?: unknown } | null;
  if (typeof b !== 'object' || b === null || b.ok !== true) return undefined;
  if (!isIdentityValue(b.runtime) || typeof b.proxyUrl !== 'string' || !URL.canParse(b.proxyUrl)) return undefined;
  const address = typeof b.address === 'string' && URL.canParse(b.address) ? b.address : undefined;
  return { runtime: b.runtime, proxyUrl: b.proxyUrl, ...(address ? { address } : {}) };
}

/** How long an ask goes unanswered before the next replica is asked too (a placement takes a millisecond or two). */
export const SCHEDULE_HEDGE_MS = 250;
/**
 * Hedges are budgeted, so that replicas all slow under load are not asked
 * for more at the worst time: each call earns a tenth of a hedge, up to a
 * burst of ten (enough for every call in flight when one replica freezes,
 * after which it is asked last and nothing needs hedging).
 */
const HEDGES_PER_CALL = 0.1;
const HEDGE_BURST = 10;
/** How long a replica that failed or lagged is asked last; doubled each time it fails again, up to the max. */
const SUSPECT_MS = 1_000;
const SUSPECT_MAX_MS = 30_000;

/**
 * Asks scheduler replicas for a placement. Placing is a read of the
 * replica's epoch, the same on every replica, so asks may overlap: a round
 * asks replicas in turn from a rotating start, the next one as soon as an
 * ask fails or has gone SCHEDULE_HEDGE_MS unanswered (a frozen or
 * partitioned replica takes connections and never answers), and the first
 * decision wins (hedges are budgeted: at most about one call in ten hedges
 * over time). A replica that failed or lagged is asked last for a while,
 * so it delays no other call. A single URL (a Service in front of the
 * replicas) is asked twice a round: the second ask goes on another
 * connection, which the Service may send to another replica. A round where
 * none answers is followed by a backoff (20 ms doubling to 1 s) and at most
 * GATEWAY_DEFAULTS.scheduleRoundsMax rounds. A replica's `unschedulable`
 * answer is final (every replica answers the same for the same epoch).
 * Throws UnschedulableError (`unschedulable`, 503) or SwitchyardError
 * `not_ready` (503, no replica answered).
 */
export class SchedulerClient {
  readonly #config: SchedulerClientConfig;
  /** Replicas to ask last: until when (a `Clock.monotonicNow()` reading), and after how many failures in a row. */
  readonly #suspects = new Map<string, { until: number; failures: number }>();
  #next = 0;
  #hedges: number = HEDGE_BURST;

  constructor(config: SchedulerClientConfig) {
    this.#config = config;
  }

  async schedule(request: ScheduleRequestInput, signal?: AbortSignal): Promise<Placement> {
    const started = performance.now();
    const done = (outcome: 'ok' | 'unschedulable' | 'error'): void =>
      this.#config.onLatency?.((performance.now() - started) / 1000, outcome);
    let backoffMs: number = GATEWAY_DEFAULTS.scheduleBackoffStartMs;
    const start = this.#next++;
    this.#hedges = Math.min(this.#hedges + HEDGES_PER_CALL, HEDGE_BURST);
    for (let round = 0; round < GATEWAY_DEFAULTS.scheduleRoundsMax; round++) {
      if (round > 0) {
        await sleep(this.#config.clock, backoffMs, signal);
        backoffMs = Math.min(backoffMs * 2, GATEWAY_DEFAULTS.scheduleBackoffMaxMs);
      }
      signal?.throwIfAborted();
      const attempt = await this.#round(this.#order(start), request, signal);
      if (attempt.kind === 'placed') {
        done('ok');
        return attempt.placement;
      }
      if (attempt.kind === 'unschedulable') {
        done('unschedulable');
        throw new UnschedulableError(`No runtime can serve this request: ${attempt.message}`, attempt.reason);
      }
    }
    done('error');
    throw new SwitchyardError('not_ready', 'No scheduler replica answered');
  }

  /** The replicas from `start` on, those in good standing first (stable), suspects after, soonest cleared first. */
  #order(start: number): string[] {
    const { schedulers } = this.#config;
    const now = this.#config.clock.monotonicNow();
    const askedLastUntil = (base: string): number => Math.max(this.#suspects.get(base)?.until ?? 0, now);
    return Array.from(
      { length: Math.max(schedulers.length, 2) },
      (_, i) => schedulers[(start + i) % schedulers.length]!,
    ).sort((a, b) => askedLastUntil(a) - askedLastUntil(b));
  }

  /** One round over `order`: resolves with the first decision, or `retry` once every ask failed. */
  #round(order: readonly string[], request: ScheduleRequestInput, signal?: AbortSignal): Promise<Attempt> {
    const abandon = new AbortController();
    const asks = signal ? AbortSignal.any([signal, abandon.signal]) : abandon.signal;
    return new Promise((resolve, reject) => {
      const outstanding: string[] = [];
      let next = 0;
      let hedge: Timer | undefined;
      let settled = false;
      const settle = (finish: () => void): void => {
        if (settled) return;
        settled = true;
        hedge?.cancel();
        // Replicas still silent when another decided lagged behind it; a caller that left says nothing of them.
        if (!signal?.aborted) for (const base of outstanding) this.#suspect(base);
        abandon.abort();
        finish();
      };
      const askNext = (): void => {
        hedge?.cancel();
        const base = order[next++]!;
        outstanding.push(base);
        if (next < order.length) {
          hedge = this.#config.clock.setTimeout(() => {
            // Out of budget: this ask goes on alone until it answers, fails or times out.
            if (this.#hedges < 1) return;
            this.#hedges -= 1;
            this.#config.upstreamLog.warn(base, 'scheduler slow to answer; asking another replica too', {
              waitedMs: SCHEDULE_HEDGE_MS,
            });
            this.#config.onHedge?.();
            askNext();
          }, SCHEDULE_HEDGE_MS);
        }
        this.#ask(base, request, asks).then(
          (attempt) => {
            outstanding.splice(outstanding.indexOf(base), 1);
            if (settled) return;
            if (attempt.kind !== 'retry') {
              this.#suspects.delete(base);
              return settle(() => resolve(attempt));
            }
            this.#suspect(base);
            if (next < order.length) askNext();
            else if (outstanding.length === 0) settle(() => resolve(attempt));
          },
          (error: unknown) => settle(() => reject(error)),
        );
      };
      askNext();
    });
  }

  /**
   * Asks `base` last for a while. Calls that overlap fail together, so a
   * failure counts towards the doubling only once the last period is over
   * (the replica was tried again): a replica that lagged through one burst
   * of calls is asked last for a second, not for the maximum.
   */
  #suspect(base: string): void {
    const now = this.#config.clock.monotonicNow();
    const known = this.#suspects.get(base);
    if (known && known.until > now) return;
    const failures = (known?.failures ?? 0) + 1;
    this.#suspects.set(base, { until: now + Math.min(SUSPECT_MS * 2 ** (failures - 1), SUSPECT_MAX_MS), failures });
  }

  async #ask(base: string, request: ScheduleRequestInput, signal?: AbortSignal): Promise<Attempt> {
    const url = new URL(`${base}/api/schedule`);
    const authorization = this.#config.authorization?.();
    try {
      const res = await this.#config.dispatcher.request({
        origin: url.origin,
        path: url.pathname,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(authorization !== undefined ? { authorization } : {}),
        },
        body: JSON.stringify(request),
        headersTimeout: this.#config.timeoutMs,
        bodyTimeout: this.#config.timeoutMs,
        ...(signal ? { signal } : {}),
      });
      const length = Number(res.headers['content-length'] ?? 0);
      if (length > RESPONSE_BYTES_MAX) {
        res.body.destroy();
        return { kind: 'retry' };
      }
      const body: unknown = await res.body.json().catch(() => undefined);
      if (res.statusCode === 200) {
        const placement = placementOf(body);
        if (placement) return { kind: 'placed', placement };
      }
      const unschedulable = (
        body as { ok?: unknown; unschedulable?: { message?: unknown; code?: unknown } } | undefined
      )?.unschedulable;
      if (res.statusCode === 503 && unschedulable) {
        const { message, code } = unschedulable;
        const reason = typeof code === 'string' ? code : undefined;
        return { kind: 'unschedulable', message: String(message ?? 'unschedulable'), reason };
      }
      // 400 means this gateway built a bad request: an internal failure, not a retry case.
      if (res.statusCode === 400) throw new SwitchyardError('internal', 'Scheduler rejected the schedule request');
      if (refusedGatewayToken(res.statusCode, res.headers, SCHEDULER_API_REALM)) {
        this.#config.upstreamLog.error(base, SCHEDULER_TOKEN_REFUSED);
        return { kind: 'retry' };
      }
      this.#config.upstreamLog.warn(base, 'scheduler answered unexpectedly', { status: res.statusCode });
      return { kind: 'retry' };
    } catch (error) {
      if (error instanceof SwitchyardError || signal?.aborted) throw error;
      this.#config.upstreamLog.warn(base, 'scheduler unreachable', { err: (error as Error).message });
      return { kind: 'retry' };
    }
  }
}
