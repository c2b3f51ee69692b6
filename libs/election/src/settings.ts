import { SwitchyardError } from '@switchyard/protocol';

/** Timing of an elector; client-go's names with units last. */
export interface ElectionTiming {
  /** How long a lease holds after its last observed renewal. Written to the lease in whole seconds, rounded up. */
  readonly leaseDurationMs: number;
  /** A leader that has not renewed for this long stops leading. */
  readonly renewDeadlineMs: number;
  /** Pause between attempts (renewals as leader, acquisitions as candidate). */
  readonly retryPeriodMs: number;
  /** A candidate waits `retryPeriodMs × (1 + random × jitterFactor)` so candidates spread out. */
  readonly jitterFactor: number;
  /** Longest one attempt (get + create/update) may take before it counts as failed. */
  readonly attemptTimeoutMs: number;
}

/** Longest delay a Node.js timer keeps (2^31 - 1 ms, 24.8 days): a longer one runs after 1 ms. */
const TIMER_DELAY_MS_MAX = 2_147_483_647;

/** client-go's defaults (design brief §6). `attemptTimeoutMs` defaults to `retryPeriodMs`. */
export const ELECTION_DEFAULTS = {
  leaseDurationMs: 15_000, // 15 s
  renewDeadlineMs: 10_000, // 10 s
  retryPeriodMs: 2_000, // 2 s
  jitterFactor: 1.2, // candidate waits 2–4.4 s
} as const;

/**
 * Fills defaults and checks the settings together, as client-go does:
 * every value finite and > 0, `leaseDurationMs > renewDeadlineMs >
 * retryPeriodMs × jitterFactor`, `attemptTimeoutMs ≤ renewDeadlineMs`; and
 * a candidate's longest wait, `retryPeriodMs × (1 + jitterFactor)`, within
 * what a timer holds.
 * Throws `SwitchyardError(invalid_request)` naming the broken rule.
 */
export function resolveTiming(input: Partial<ElectionTiming>): ElectionTiming {
  const timing: ElectionTiming = {
    leaseDurationMs: input.leaseDurationMs ?? ELECTION_DEFAULTS.leaseDurationMs,
    renewDeadlineMs: input.renewDeadlineMs ?? ELECTION_DEFAULTS.renewDeadlineMs,
    retryPeriodMs: input.retryPeriodMs ?? ELECTION_DEFAULTS.retryPeriodMs,
    jitterFactor: input.jitterFactor ?? ELECTION_DEFAULTS.jitterFactor,
    attemptTimeoutMs: input.attemptTimeoutMs ?? input.retryPeriodMs ?? ELECTION_DEFAULTS.retryPeriodMs,
  };
  for (const [key, value] of Object.entries(timing)) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      fail(`${key} must be a finite number > 0 (got ${String(value)})`);
    }
  }
  const { leaseDurationMs, renewDeadlineMs, retryPeriodMs, jitterFactor, attemptTimeoutMs } = timing;
  if (leaseDurationMs <= renewDeadlineMs) {
    fail(`leaseDurationMs (${leaseDurationMs}) must be greater than renewDeadlineMs (${renewDeadlineMs})`);
  }
  if (renewDeadlineMs <= retryPeriodMs * jitterFactor) {
    fail(
      `renewDeadlineMs (${renewDeadlineMs}) must be greater than retryPeriodMs × jitterFactor (${retryPeriodMs} × ${jitterFactor})`,
    );
  }
  if (retryPeriodMs * (1 + jitterFactor) > TIMER_DELAY_MS_MAX) {
    fail(
      `retryPeriodMs × (1 + jitterFactor) (${retryPeriodMs} × ${1 + jitterFactor}) must be at most ${TIMER_DELAY_MS_MAX}: a candidate's longer wait would end at once`,
    );
  }
  if (attemptTimeoutMs > renewDeadlineMs) {
    fail(`attemptTimeoutMs (${attemptTimeoutMs}) must not exceed renewDeadlineMs (${renewDeadlineMs})`);
  }
  return timing;
}

function fail(message: string): never {
  throw new SwitchyardError('invalid_request', `invalid election settings: ${message}`);
}
