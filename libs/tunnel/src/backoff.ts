export interface BackoffOptions {
  /** First retry delay. Default 250 ms. */
  readonly initialMs?: number;
  /** Cap on any delay. Default 30000 ms. */
  readonly maxMs?: number;
  /** Fraction (0–1) of each delay that is randomised away, so a fleet does not reconnect in lockstep. Default 0.2. */
  readonly jitter?: number;
}

export const BACKOFF_DEFAULTS = { initialMs: 250, maxMs: 30_000, jitter: 0.2 } as const;

/** Delay before retry number `attempt` (0-based): exponential, capped, jittered downwards. */
export function backoffDelayMs(attempt: number, options: BackoffOptions, random: () => number): number {
  const initialMs = options.initialMs ?? BACKOFF_DEFAULTS.initialMs;
  const maxMs = options.maxMs ?? BACKOFF_DEFAULTS.maxMs;
  const jitter = Math.min(1, Math.max(0, options.jitter ?? BACKOFF_DEFAULTS.jitter));
  const base = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(base * (1 - jitter * random()));
}

/**
 * Delay before a retry due once `afterMs` have passed (a refusal that said when it will end): that, capped
 * at `maxMs`, jittered upwards rather than downwards, as a retry any sooner would be refused again.
 */
export function delayAfterMs(afterMs: number, options: BackoffOptions, random: () => number): number {
  const maxMs = options.maxMs ?? BACKOFF_DEFAULTS.maxMs;
  const jitter = Math.min(1, Math.max(0, options.jitter ?? BACKOFF_DEFAULTS.jitter));
  return Math.min(maxMs, Math.round(afterMs * (1 + jitter * random())));
}
