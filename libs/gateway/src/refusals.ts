// The reason refusals_total counts a refusal under, for the refusals that
// are thrown (the others are counted where they are answered, in gateway.ts).
import { SwitchyardError } from '@switchyard/protocol';
import type { ErrorCode } from '@switchyard/protocol';
import { InvalidTokenError } from './challenge.ts';
import type { Refusal, ScopeRefusal } from './challenge.ts';
import type { RefusalReason } from './metrics.ts';

/**
 * Codes that only the gateway's own refusals carry, each for one cause, so
 * the code is the reason. Left out: codes an upstream failure or a
 * scheduler's answer carries too (`not_ready`, `session_not_found`), and
 * `forbidden` and `unauthorized`, whose causes are told apart where they
 * are answered.
 */
const REASON_OF_CODE: Partial<Record<ErrorCode, RefusalReason>> = {
  // Its own headerBytesMax is answered in gateway.ts; this one is past what it forwards (upstream-call.ts).
  header_too_large: 'header_too_large',
  method_not_allowed: 'method_not_allowed',
  unsupported_protocol_version: 'unsupported_protocol_version',
  too_many_requests: 'too_many_requests',
  body_too_large: 'body_too_large',
  request_timeout: 'request_timeout',
  parse_error: 'parse_error',
  invalid_request: 'invalid_request',
  bad_identity: 'bad_identity',
  session_required: 'session_required',
};

/** The reason of a thrown refusal of the gateway's own; undefined for any other failure. */
export function thrownRefusalReason(error: unknown): RefusalReason | undefined {
  return error instanceof SwitchyardError ? REASON_OF_CODE[error.code] : undefined;
}

/**
 * The reason of a token refused: `refusal` as refusalOf made it of `error`
 * (none for a request without a bearer token), and `scope` for a token
 * short of scopes, which the caller knows apart (auth.requiredScopes, a
 * class's or a tool's).
 */
export function tokenRefusalReason(
  error: SwitchyardError,
  refusal: Refusal | undefined,
  scope: ScopeRefusal,
): RefusalReason {
  if (refusal === undefined) return 'no_token';
  if (refusal.error === 'insufficient_scope') return scope;
  return error instanceof InvalidTokenError ? error.reason : 'invalid_token';
}
