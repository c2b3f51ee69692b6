import type { Dispatcher } from 'undici';
import { SCHEDULER_API_REALM, SwitchyardError, isIdentityValue } from '@switchyard/protocol';
import type { ThrottledLog } from './throttled-log.ts';
import { SCHEDULER_TOKEN_REFUSED, refusedGatewayToken } from './upstream.ts';
import type { ScheduleRequestInput } from '@switchyard/protocol';
import { sleep } from '@switchyard/clock';
import type { Clock } from '@switchyard/clock';
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
}

const RESPONSE_BYTES_MAX = 256 * 1024;

/** Outcome of one replica: a decision ends the search, `retry` tries the next replica. */
type Attempt =
  { kind: 'placed'; placement: Placement } | { kind: 'unschedulable'; message: string } | { kind: 'retry' };

function placementOf(body: unknown): Placement | undefined {
  const b = body as { ok?: unknown; runtime?: unknown; proxyUrl?: unknown; address?: unknown } | null;
  if (typeof b !== 'object' || b === null || b.ok !== true) return undefined;
  if (!isIdentityValue(b.runtime) || typeof b.proxyUrl !== 'string' || !URL.canParse(b.proxyUrl)) return undefined;
  const address = typeof b.address === 'string' && URL.canParse(b.address) ? b.address : undefined;
  return { runtime: b.runtime, proxyUrl: b.proxyUrl, ...(address ? { address } : {}) };
}

/**
 * Asks scheduler replicas for a placement. Replicas are tried in turn from a
 * rotating start; a round where none answers is followed by a backoff
 * (20 ms doubling to 1 s) and at most GATEWAY_DEFAULTS.scheduleRoundsMax
 * rounds. A replica's `unschedulable` answer is final (every replica answers
 * the same for the same epoch). Throws SwitchyardError `unschedulable` (503)
 * or `not_ready` (503, no replica answered).
 */
export class SchedulerClient {
  readonly #config: SchedulerClientConfig;
  #next = 0;

  constructor(config: SchedulerClientConfig) {
    this.#config = config;
  }

  async schedule(request: ScheduleRequestInput, signal?: AbortSignal): Promise<Placement> {
    const started = performance.now();
    const done = (outcome: 'ok' | 'unschedulable' | 'error'): void =>
      this.#config.onLatency?.((performance.now() - started) / 1000, outcome);
    const { schedulers } = this.#config;
    let backoffMs: number = GATEWAY_DEFAULTS.scheduleBackoffStartMs;
    const start = this.#next++ % schedulers.length;
    for (let round = 0; round < GATEWAY_DEFAULTS.scheduleRoundsMax; round++) {
      if (round > 0) {
        await sleep(this.#config.clock, backoffMs, signal);
        backoffMs = Math.min(backoffMs * 2, GATEWAY_DEFAULTS.scheduleBackoffMaxMs);
      }
      for (let i = 0; i < schedulers.length; i++) {
        signal?.throwIfAborted();
        const attempt = await this.#ask(schedulers[(start + i) % schedulers.length]!, request, signal);
        if (attempt.kind === 'placed') {
          done('ok');
          return attempt.placement;
        }
        if (attempt.kind === 'unschedulable') {
          done('unschedulable');
          throw new SwitchyardError('unschedulable', `No runtime can serve this request: ${attempt.message}`);
        }
      }
    }
    done('error');
    throw new SwitchyardError('not_ready', 'No scheduler replica answered');
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
      const unschedulable = (body as { ok?: unknown; unschedulable?: { message?: unknown } } | undefined)
        ?.unschedulable;
      if (res.statusCode === 503 && unschedulable) {
        return { kind: 'unschedulable', message: String(unschedulable.message ?? 'unschedulable') };
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
