import type * as jose from 'jose';
import type { Clock } from '@switchyard/clock';
import { SwitchyardError } from '@switchyard/protocol';
import { anyPortFetch } from '@switchyard/service';

/** What of jose this needs, passed in: jose is loaded in auth mode `jwt` only. */
type Jose = Pick<typeof jose, 'createLocalJWKSet' | 'createRemoteJWKSet' | 'customFetch'>;

export interface KeySetOptions {
  /** Least time between fetches for a `kid` the set lacks (jose's cooldown). */
  readonly cooldownMs: number;
  /** After a failed fetch, how long no fetch is tried again. */
  readonly retryMs: number;
  /** Told of every failed fetch (at most one per `retryMs`). */
  readonly failed?: (cause: unknown) => void;
  /** Times `retryMs` (the gateway's clock). */
  readonly clock: Clock;
}

/**
 * Key selection verdicts of a key set: the token names no key in it, more
 * than one, or an algorithm no published key verifies (alg "none", HMAC).
 */
const KEY_VERDICTS = new Set(['ERR_JWKS_NO_MATCHING_KEY', 'ERR_JWKS_MULTIPLE_MATCHING_KEYS', 'ERR_JOSE_NOT_SUPPORTED']);

function unavailable(cause: unknown): SwitchyardError {
  return new SwitchyardError('not_ready', 'Authentication backend unavailable', { cause });
}

/**
 * The keys of a remote JWKS, fetched by jose: at first use, when the set is
 * older than jose's 10 minutes, and for a `kid` it lacks at most once per
 * `cooldownMs`. Every failure but a key selection verdict throws
 * SwitchyardError('not_ready'): a set we cannot fetch is not the client's
 * fault. jose retries a failed fetch on the next request, so a JWKS that
 * answers errors would be asked once per client request; here, for
 * `retryMs` after a failure, no fetch is made: a set still fresh answers
 * from the keys it holds (a `kid` it lacks is a verdict then), else the
 * request gets the 503 at once. Not guaranteed: a stale set is never used,
 * so a JWKS down for longer than the cache age refuses every token; jose
 * times its cache age and cooldown on the system clock (it takes no other).
 */
export function remoteKeySet(lib: Jose, url: URL, options: KeySetOptions): jose.JWTVerifyGetKey {
  // Fetched with node:http, not fetch, which refuses a JWKS on a port browsers block (6000, 10080, …).
  const remote = lib.createRemoteJWKSet(url, { cooldownDuration: options.cooldownMs, [lib.customFetch]: anyPortFetch });
  let retryAt = 0;
  let failure: unknown;
  let held: jose.JWTVerifyGetKey | undefined;
  return async (header, token) => {
    if (options.clock.monotonicNow() < retryAt) {
      if (!held || !remote.fresh) throw unavailable(failure);
      return held(header, token);
    }
    try {
      return await remote(header, token);
    } catch (cause) {
      if (KEY_VERDICTS.has(String((cause as { code?: unknown } | null)?.code))) throw cause;
      retryAt = options.clock.monotonicNow() + options.retryMs;
      failure = cause;
      options.failed?.(cause);
      const keys = remote.fresh ? remote.jwks() : undefined;
      held = keys ? lib.createLocalJWKSet(keys) : undefined;
      throw unavailable(cause);
    }
  };
}
