import { createHash, timingSafeEqual } from 'node:crypto';
import type * as Jose from 'jose';
import type { JWTPayload, JWTVerifyGetKey, JWTVerifyOptions, JWTVerifyResult } from 'jose';
import type { Clock } from '@switchyard/clock';
import { SwitchyardError } from '@switchyard/protocol';
import { watchTokenRevocations } from '@switchyard/service';
import { endAtWallTime } from './credential-end.ts';
import { remoteKeySet } from './jwks.ts';
import { InsufficientScopeError, InvalidTokenError } from './challenge.ts';
import { grantedScopes, issuedInFuture, labelPrefixOf, lacksAny, passesAsIs, principalClaimOf } from './jwt-claims.ts';
import { GATEWAY_DEFAULTS, type AuthOptions } from './options.ts';
import type { ThrottledLog } from './throttled-log.ts';

/** What a request was admitted on. */
export interface Credential {
  readonly principal: string;
  /** Wall-clock ms at which it stops admitting: a JWT's `exp` plus the clock tolerance; none for a bearer token. */
  readonly endsAtMs?: number;
  /** The scopes a JWT grants, read only when a class or a tool is held to scopes (auth.classScopes, auth.toolScopes). */
  readonly scopes?: ReadonlySet<string>;
}

export interface Authenticator {
  /**
   * Turns an `Authorization` header into a credential, or throws
   * SwitchyardError('unauthorized'), or InsufficientScopeError for a valid
   * token that lacks a required scope.
   */
  authenticate(authorization: string | undefined): Promise<Credential>;
  /**
   * Holds a request to the credential it was admitted on: calls `end` once
   * it no longer admits (a bearer token removed from a list that changes,
   * within REVOCATION_CHECK_MS; a JWT at `endsAtMs`). An admission outlives
   * its check by as long as a response stays open, hours for an event
   * stream. Returns what forgets the request (call it when it is over), or
   * undefined when nothing can end the credential (a fixed token list).
   */
  hold(credential: Credential, end: () => void): (() => void) | undefined;
  /** Stops watching the token list; ends nothing. */
  close(): void;
}

/** Told how many requests were ended at a check of the token list. */
export type OnRevoked = (ended: number) => void;

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** A stable label for a secret: never the secret, short enough for headers and logs. */
function label(prefix: string, secret: string): string {
  return `${prefix}:${digest(secret).toString('hex').slice(0, 24)}`;
}

/** An error's message and its cause's (fetch's TypeError says "fetch failed" and puts the reason in its cause). */
function messageOf(error: unknown): string {
  const { message, cause } = (error ?? {}) as { message?: unknown; cause?: { message?: unknown } };
  return cause?.message === undefined ? String(message) : `${String(message)}: ${String(cause.message)}`;
}

/**
 * The token of a Bearer header. A malformed one ('Bearer' alone, a token with
 * a space) is refused as a token, 401, not as RFC 6750 §3.1's 400
 * invalid_request: MCP clients run their auth provider (refresh, sign in
 * again) on a 401 only, and fail the request on a 400.
 */
function bearerToken(authorization: string | undefined): string {
  const match = authorization === undefined ? null : /^Bearer[ ]+([^ ]+)[ ]*$/i.exec(authorization);
  if (!match) throw new SwitchyardError('unauthorized', 'Unauthorized: a bearer token is required');
  return match[1]!;
}

/**
 * The audiences a token for `resource` may name: the resource as the
 * protected resource metadata serves it (the URL standard's form: host in
 * lower case, no default port), which is what MCP clients ask their tokens
 * for (RFC 8707), and as configured, which tokens may name already.
 */
function resourceAudiences(resource: string): string[] {
  const served = new URL(resource).href;
  return served === resource ? [resource] : [served, resource];
}

/** The `typ` of RFC 9068 JWT access tokens (auth.requireAccessTokenType). */
const ACCESS_TOKEN_TYPE = 'at+jwt';

/**
 * What a client is told of a token jose refused. An expired token is said
 * apart, as a client refreshes it, and so is a token of another type (an
 * ID token sent for an access token); for anything else, getting another
 * token is not worth it.
 */
function problemOf(lib: typeof Jose, cause: Jose.errors.JOSEError): string {
  if (cause instanceof lib.errors.JWTExpired) return 'token expired';
  if (cause instanceof lib.errors.JWTClaimValidationFailed && cause.claim === 'typ')
    return `token is not an access token (typ ${ACCESS_TOKEN_TYPE})`;
  return 'invalid token';
}

/** What refusals_total counts a token jose refused as: a client's token gone stale, or one issued for another service. */
function reasonOf(lib: typeof Jose, cause: Jose.errors.JOSEError): InvalidTokenError['reason'] {
  if (cause instanceof lib.errors.JWTExpired) return 'expired_token';
  if (cause instanceof lib.errors.JWTClaimValidationFailed && cause.claim === 'aud') return 'wrong_audience';
  return 'invalid_token';
}

/**
 * What a token's `aud` must name (one of): a token must have been issued
 * for this gateway (MCP authorization), for `audience`, else for the
 * resource clients asked tokens for (RFC 8707); without either, anything.
 */
function expectedAudience(options: AuthOptions): string | string[] | undefined {
  const { audience, resource } = options;
  if (audience !== undefined) return typeof audience === 'string' ? audience : [...audience];
  return resource === undefined ? undefined : resourceAudiences(resource);
}

/**
 * jwtVerify with a key set, trying each key when the token names none and
 * more than one fits its algorithm: a `kid` is optional (RFC 7515), and a
 * provider that leaves it out signs with one of the keys it publishes, two
 * of them while it rotates. jose leaves that to its caller (it throws
 * ERR_JWKS_MULTIPLE_MATCHING_KEYS, an iterator over the candidates). A token
 * costs one signature check per published key of its algorithm at most.
 */
async function verifiedByAny(
  lib: typeof Jose,
  token: string,
  keys: JWTVerifyGetKey,
  options: JWTVerifyOptions,
): Promise<JWTVerifyResult> {
  try {
    return await lib.jwtVerify(token, keys, options);
  } catch (error) {
    if (!(error instanceof lib.errors.JWKSMultipleMatchingKeys)) throw error;
    for await (const key of error) {
      try {
        return await lib.jwtVerify(token, key, options);
      } catch (inner) {
        if (!(inner instanceof lib.errors.JWSSignatureVerificationFailed)) throw inner;
      }
    }
    throw new lib.errors.JWSSignatureVerificationFailed();
  }
}

/**
 * Builds the authenticator for a mode; none for mode `none`, so that a
 * gateway without auth spends nothing on it per request. Bearer tokens
 * are compared as SHA-256 digests with timingSafeEqual, so neither content
 * nor length leaks through timing. A JWT's principal is its
 * `principalClaim` (default `sub`); one that is not an identity value, or
 * has the form of a label, is replaced by a label. A JWT must grant every one of
 * `requiredScopes`; with `classScopes` or `toolScopes`, its credential carries the scopes it grants.
 */
export function createAuthenticator(
  options: AuthOptions,
  clock: Clock,
  log?: ThrottledLog,
  onRevoked?: OnRevoked,
): Authenticator | undefined {
  if (options.mode === 'none') return undefined;
  if (options.mode === 'bearer') return bearerAuthenticator(options, clock, onRevoked);
  return jwtAuthenticator(options, clock, log);
}

function bearerAuthenticator(options: AuthOptions, clock: Clock, onRevoked?: OnRevoked): Authenticator {
  const { tokens } = options;
  const source = typeof tokens === 'function' ? tokens : () => tokens ?? [];
  let hashed: readonly string[] | undefined;
  // One credential per token, made once per list: admitting a request allocates nothing.
  let known: { digest: Buffer; credential: Credential }[] = [];
  let principals = new Set<string>();
  const refresh = (): void => {
    const current = source();
    if (current === hashed) return;
    known = current.map((t) => ({ digest: digest(t), credential: { principal: label('token', t) } }));
    principals = new Set(known.map((k) => k.credential.principal));
    hashed = current;
  };
  // A fixed list removes no token: nothing to hold requests to.
  const revocations =
    typeof tokens === 'function'
      ? watchTokenRevocations({ tokens, clock, ...(onRevoked ? { onRevoked } : {}) })
      : undefined;
  return {
    async authenticate(authorization) {
      refresh();
      const presented = digest(bearerToken(authorization));
      let credential: Credential | undefined;
      for (const k of known) if (timingSafeEqual(k.digest, presented)) credential = k.credential;
      if (!credential) throw new SwitchyardError('unauthorized', 'Unauthorized: unknown token');
      return credential;
    },
    hold(credential, end) {
      // A token's principal is its digest's label: still listed while the label is.
      return revocations?.hold(() => (refresh(), principals.has(credential.principal)), end);
    },
    close: () => revocations?.close(),
  };
}

function jwtAuthenticator(options: AuthOptions, clock: Clock, log?: ThrottledLog): Authenticator {
  // Loaded in jwt mode only: a few MB of resident memory the other modes never use.
  const jose = import('jose');
  const jwksUrl = new URL(options.jwksUrl!);
  const jwksLabel = `${jwksUrl.origin}${jwksUrl.pathname}`;
  let jwks: JWTVerifyGetKey | undefined;
  const audience = expectedAudience(options);
  const principalClaim = options.principalClaim ?? GATEWAY_DEFAULTS.jwtPrincipalClaim;
  const labelPrefix = labelPrefixOf(principalClaim);
  const requiredScopes = options.requiredScopes ?? [];
  const scopeClaims = options.scopeClaims ?? GATEWAY_DEFAULTS.jwtScopeClaims;
  // Routing checks a class's or a tool's scopes (ClassScopes, ToolScopes): the credential carries them then, and only then.
  const keepScopes = Object.keys({ ...options.classScopes, ...options.toolScopes }).length > 0;
  const keySetOptions = {
    cooldownMs: options.jwksCooldownMs ?? GATEWAY_DEFAULTS.jwksCooldownMs,
    retryMs: options.jwksRetryMs ?? GATEWAY_DEFAULTS.jwksRetryMs,
    // Clients see only a 503: the operator must learn which set and why. Named
    // without its query, which may carry a tenant key.
    failed: (cause: unknown) =>
      log?.error(jwksLabel, 'JWKS cannot be fetched: requests get 503 until it answers', { err: messageOf(cause) }),
    clock,
  };
  const toleranceMs = GATEWAY_DEFAULTS.jwtClockToleranceMs;
  const verifyOptions = {
    // Without `exp` a token is good forever: only a key rotation would end it.
    requiredClaims: ['exp'],
    clockTolerance: toleranceMs / 1000,
    // Checked before any key is looked up: a token of another costs no JWKS fetch.
    algorithms: [...(options.algorithms ?? GATEWAY_DEFAULTS.jwtAlgorithms)],
    ...(options.issuer ? { issuer: options.issuer } : {}),
    ...(audience ? { audience } : {}),
    // jose compares media types as RFC 9068 §4 says: any case, `application/` optional.
    ...(options.requireAccessTokenType ? { typ: ACCESS_TOKEN_TYPE } : {}),
  };
  const authenticate = async (authorization: string | undefined): Promise<Credential> => {
    const token = bearerToken(authorization);
    const lib = await jose;
    const { errors } = lib;
    jwks ??= remoteKeySet(lib, jwksUrl, keySetOptions);
    // Token times on the clock that also ends what the token lets in (hold), not jose's Date.
    const currentDate = new Date(clock.now());
    let payload: JWTPayload;
    try {
      ({ payload } = await verifiedByAny(lib, token, jwks, { ...verifyOptions, currentDate }));
    } catch (cause) {
      // Past the key set, whatever jose refuses is the token's fault, whatever its
      // code: ERR_JOSE_NOT_SUPPORTED is how alg "none", HS256 or an unknown crit
      // header ends. Anything else is a fault of ours, not the client's.
      if (cause instanceof SwitchyardError || !(cause instanceof errors.JOSEError)) throw cause;
      throw new InvalidTokenError(`Unauthorized: ${problemOf(lib, cause)}`, reasonOf(lib, cause), { cause });
    }
    if (issuedInFuture(payload, currentDate, toleranceMs))
      throw new SwitchyardError('unauthorized', 'Unauthorized: token issued in the future');
    const principal = principalClaimOf(payload, principalClaim);
    const scopes = keepScopes || requiredScopes.length > 0 ? grantedScopes(payload, scopeClaims) : undefined;
    // After the principal: a token that is no good is a 401 whatever its scopes.
    if (scopes !== undefined && lacksAny(scopes, requiredScopes))
      throw new InsufficientScopeError('Forbidden: token lacks a required scope', requiredScopes, 'insufficient_scope');
    return {
      principal: passesAsIs(principal, labelPrefix) ? principal : label(labelPrefix, principal),
      // jose required `exp` and checked it is a number: the token admits until then, and the skew verification allows.
      endsAtMs: payload.exp! * 1000 + toleranceMs,
      ...(keepScopes ? { scopes } : {}),
    };
  };
  return {
    authenticate,
    hold: (credential, end) => endAtWallTime(clock, credential.endsAtMs!, end),
    close() {},
  };
}
