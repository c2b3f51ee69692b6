import { SwitchyardError } from '@switchyard/protocol';

/** What a token short of scopes lacks, as `refusals_total` counts it: those of every request, a class's or a tool's. */
export type ScopeRefusal = 'insufficient_scope' | 'class_scope' | 'tool_scope';

/**
 * A valid token that lacks a scope the request needs (a 403): `scopes` are
 * every one it needs, which the challenge names (RFC 6750 §3.1), and
 * `reason` whose scopes they are.
 */
export class InsufficientScopeError extends SwitchyardError {
  readonly scopes: readonly string[];
  readonly reason: ScopeRefusal;
  constructor(message: string, scopes: readonly string[], reason: ScopeRefusal) {
    super('forbidden', message);
    this.scopes = scopes;
    this.reason = reason;
  }
}

/**
 * A token refused (a 401) for a cause an operator needs told apart, which
 * `refusals_total` counts by (`reason`); the client is told only what the
 * message says.
 */
export class InvalidTokenError extends SwitchyardError {
  readonly reason: 'invalid_token' | 'expired_token' | 'wrong_audience';
  constructor(message: string, reason: InvalidTokenError['reason'], options?: { cause?: unknown }) {
    super('unauthorized', message, options);
    this.reason = reason;
  }
}

/**
 * Why a token was refused, as RFC 6750 §3.1 says it: `invalid_token` (a
 * 401: the client gets another token) or `insufficient_scope` (a 403: the
 * client asks for the scopes `scope` names, MCP authorization's step-up).
 */
export interface Refusal {
  readonly error: 'invalid_token' | 'insufficient_scope';
  /** A fixed phrase of ours, never the token or jose's words. */
  readonly description: string;
  /** `insufficient_scope`: the scopes the request needs, space-separated. */
  readonly scope?: string;
}

/**
 * The challenge of a refusal without protected resource metadata (RFC 6750),
 * naming the scopes to ask for (MCP authorization: a 401 SHOULD): the
 * refusal's, else `requiredScopes`. No error for a request without a token.
 */
export function bearerChallenge(refusal: Refusal | undefined, requiredScopes: readonly string[] = []): string {
  const scopes = refusal?.scope ?? requiredScopes.join(' ');
  const scope = scopes ? `, scope="${scopes}"` : '';
  return `Bearer realm="switchyard"${scope}${errorParams(refusal)}`;
}

/** RFC 6750 §3's error parameters of a refusal, or none without one. */
export function errorParams(refusal: Refusal | undefined): string {
  if (refusal === undefined) return '';
  const { error, description } = refusal;
  // error_description takes printable ASCII but `"` and `\`: anything else is not said.
  const said = /^[\x20\x21\x23-\x5b\x5d-\x7e]+$/.test(description) ? `, error_description="${description}"` : '';
  return `, error="${error}"${said}`;
}

/**
 * Whether `authorization` is of the Bearer scheme, right or wrong: only such
 * a header gets RFC 6750's error="invalid_token". Another scheme (Basic) is
 * an authentication method the gateway does not take, and §3.1 says its 401
 * SHOULD carry no error code, just the challenge.
 */
function isBearerScheme(authorization: string | undefined): boolean {
  return authorization !== undefined && /^Bearer(?: |$)/i.test(authorization);
}

/**
 * The refusal an Authenticator's error makes of a request with
 * `authorization`: `forbidden` is a token short of the scopes an
 * InsufficientScopeError names (else of `requiredScopes`), `unauthorized`
 * an invalid token, or none for a request without one.
 */
export function refusalOf(
  error: SwitchyardError,
  authorization: string | undefined,
  requiredScopes: readonly string[] | undefined,
): Refusal | undefined {
  const description = error.message.replace(/^(?:Unauthorized|Forbidden): /, '');
  if (error.code === 'forbidden') {
    const scopes = error instanceof InsufficientScopeError ? error.scopes : (requiredScopes ?? []);
    return { error: 'insufficient_scope', description, scope: scopes.join(' ') };
  }
  return isBearerScheme(authorization) ? { error: 'invalid_token', description } : undefined;
}
