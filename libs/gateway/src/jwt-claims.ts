import type { JWTPayload } from 'jose';
import { SwitchyardError, isIdentityValue } from '@switchyard/protocol';

/**
 * A claim name auth.principalClaim takes: printable ASCII but space, `"`
 * and `\` (a namespaced claim, `https://example.com/uid`, included), so it
 * fits a quoted error_description when a token lacks it. Top-level only:
 * a dot is part of the name, as jose reads the payload.
 */
export const JWT_CLAIM_NAME = /^[\x21\x23-\x5b\x5d-\x7e]{1,256}$/;

/**
 * The JWS algorithms auth.algorithms may list: the asymmetric ones jose
 * verifies. Never `none` nor HMAC (HS256…): a JWKS publishes public keys,
 * and a token MACed with anything it publishes is one anybody could make.
 */
export const JWT_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
  'ML-DSA-44',
  'ML-DSA-65',
  'ML-DSA-87',
] as const;

export type JwtAlgorithm = (typeof JWT_ALGORITHMS)[number];

/** Whether a claim name makes a label prefix that is itself an identity value (`email:<hash>`). */
const LABEL_PREFIX = /^[A-Za-z0-9._-]{1,32}$/;

/**
 * The principal `payload` names in `claim`, a non-empty string; throws
 * SwitchyardError('unauthorized') otherwise. The string is the caller's to
 * check as an identity value.
 */
export function principalClaimOf(payload: JWTPayload, claim: string): string {
  // jose checks claims only against expected values: their types are ours to check.
  const value = payload[claim];
  if (typeof value === 'string' && value !== '') return value;
  const lacks = claim === 'sub' ? 'token has no subject' : `token has no ${claim} claim`;
  throw new SwitchyardError('unauthorized', `Unauthorized: ${lacks}`);
}

/**
 * Whether a principal read from a token may travel as it is: an identity
 * value, and not of the form of a label (`<prefix>:` and 24 hex digits),
 * which a holder who sets the claim (a display name, a username) could
 * otherwise give to pass for the principal another value is labelled as.
 */
export function passesAsIs(value: string, prefix: string): boolean {
  if (!isIdentityValue(value)) return false;
  return !(value.startsWith(`${prefix}:`) && /^[0-9a-f]{24}$/.test(value.slice(prefix.length + 1)));
}

/** The prefix of the label that stands for an unfit value of `claim`. */
export function labelPrefixOf(claim: string): string {
  return LABEL_PREFIX.test(claim) ? claim : 'claim';
}

/**
 * The scopes `payload` grants: those of the first of `claims` it carries,
 * by default its `scope` (RFC 9068, RFC 8693: space-separated), else its
 * `scp` (space-separated from Microsoft Entra ID, a list from Okta); Entra
 * ID's application tokens carry `roles` (a list) instead. A claim of another
 * type grants none. Compared whole and case-sensitive (RFC 6749 §3.3).
 */
export function grantedScopes(payload: JWTPayload, claims: readonly string[]): ReadonlySet<string> {
  const name = claims.find((c) => payload[c] !== undefined);
  const claim = name === undefined ? undefined : payload[name];
  return new Set(
    typeof claim === 'string'
      ? claim.split(' ')
      : Array.isArray(claim)
        ? claim.filter((s) => typeof s === 'string')
        : [],
  );
}

/** Whether `granted` lacks a scope of `required`. */
export function lacksAny(granted: ReadonlySet<string>, required: readonly string[]): boolean {
  return required.some((scope) => !granted.has(scope));
}

/**
 * Whether `payload` was issued (`iat`) later than `now` and `toleranceMs`.
 * RFC 7519 leaves `iat` informational, but a provider whose clock agrees
 * with ours (within the tolerance) issues no such token: a wrong clock
 * or a wrong signer does, so it is refused, as jose does when it is asked
 * for a token's age. Compared in whole seconds, as jose compares `nbf`. A
 * token without `iat` was not issued in the future (jose refuses one that
 * is not a number).
 */
export function issuedInFuture(payload: JWTPayload, now: Date, toleranceMs: number): boolean {
  return payload.iat !== undefined && payload.iat > Math.floor(now.getTime() / 1000) + toleranceMs / 1000;
}
