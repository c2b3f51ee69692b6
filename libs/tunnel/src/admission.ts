import { hash, timingSafeEqual } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { RUNTIME_INFO_HEADER, parseWith, runtimeInfoSchema } from '@switchyard/protocol';
import type { RuntimeInfo } from '@switchyard/protocol';
import { parseJoinTokens } from './join-scope.ts';

/** Why an upgrade request was refused, as written back on the raw socket. */
export interface Refusal {
  readonly status: 400 | 401 | 403 | 409 | 431 | 501 | 502 | 503;
  readonly body: {
    readonly error: string;
    readonly field?: string;
    readonly detail?: string;
    readonly runtime?: string;
    /** A 409 for an id another live runtime holds: when the id is free should that runtime stay silent. */
    readonly droppedIfSilentInMs?: number;
  };
  /** Headers besides the standard ones (a proxy refusal's `Retry-After` and error header). */
  readonly headers?: Readonly<Record<string, string>>;
}

export type Admission =
  | {
      readonly ok: true;
      readonly info: RuntimeInfo;
      /** SHA-256 of the presented token: which token a tunnel came with, without keeping the token. */
      readonly tokenDigest: Buffer;
    }
  | { readonly ok: false; readonly refusal: Refusal };

const sha256 = (value: string): Buffer => hash('sha256', value, 'buffer');

/**
 * Digests of the configured tokens, which are few and the same on every
 * request (a runtime's direct listener checks one per tool call); bounded,
 * should a caller's token list keep changing. Presented tokens are never
 * kept.
 */
const configured = new Map<string, Buffer>();
const CONFIGURED_MAX = 64;

function configuredDigest(token: string): Buffer {
  let digest = configured.get(token);
  if (!digest) {
    if (configured.size >= CONFIGURED_MAX) configured.clear();
    digest = sha256(token);
    configured.set(token, digest);
  }
  return digest;
}

/**
 * Constant-time membership of `presented` among `tokens`: both sides are
 * hashed to equal length and every candidate is compared, so neither timing
 * nor an early exit reveals which token (or which prefix) matched.
 */
export function tokenMatches(presented: string, tokens: readonly string[]): boolean {
  const digest = sha256(presented);
  let match = false;
  for (const token of tokens) match = timingSafeEqual(digest, configuredDigest(token)) || match;
  return match && tokens.length > 0;
}

/** True when `authorization` is `Bearer <t>` with `t` among `tokens` (constant time, as `tokenMatches`). */
export function bearerMatches(authorization: string | undefined, tokens: readonly string[]): boolean {
  const bearer = bearerToken(authorization);
  return bearer !== undefined && tokenMatches(bearer, tokens);
}

/** Total bytes of the request's header names and values, as received. */
export function headerBytes(req: IncomingMessage): number {
  let total = 0;
  for (const part of req.rawHeaders) total += Buffer.byteLength(part) + 2;
  return total;
}

/** The token of a `Bearer <t>` header; undefined for none or another scheme. */
export function bearerToken(authorization: string | undefined): string | undefined {
  return /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];
}

/**
 * The runtime ids a presented token (by its digest) admits among join token `lines` (see
 * `parseJoinTokens`), as a test; undefined when it is none of them. Compared in constant time, as
 * `tokenMatches`; a token listed twice admits what either line admits.
 */
export function joinTokenScope(
  tokenDigest: Buffer,
  lines: readonly string[],
): ((runtimeId: string) => boolean) | undefined {
  const matched = parseJoinTokens(lines).filter((t) => timingSafeEqual(tokenDigest, configuredDigest(t.token)));
  return matched.length > 0 ? (runtimeId) => matched.some((t) => t.admits(runtimeId)) : undefined;
}

/**
 * Checks size, credentials and self-description of a connect request, in that order, then that the
 * token admits the id the runtime names. `tokens` are join token lines: `<token> [<id pattern>]`.
 */
export function admit(req: IncomingMessage, tokens: readonly string[], headerBytesMax: number): Admission {
  if (headerBytes(req) > headerBytesMax) {
    return refuse(431, { error: 'request headers too large', detail: `limit is ${headerBytesMax} bytes` });
  }
  const presented = bearerToken(req.headers.authorization);
  const tokenDigest = presented === undefined ? undefined : sha256(presented);
  const scope = tokenDigest && joinTokenScope(tokenDigest, tokens);
  if (!tokenDigest || !scope) return refuse(401, { error: 'invalid or missing join token' });
  const raw = req.headers[RUNTIME_INFO_HEADER];
  if (typeof raw !== 'string' || raw === '') {
    return refuse(400, { error: 'missing X-Runtime-Info header', field: 'X-Runtime-Info' });
  }
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    return refuse(400, { error: 'X-Runtime-Info is not base64url JSON', field: 'X-Runtime-Info' });
  }
  const parsed = parseWith(runtimeInfoSchema, decoded);
  if (!parsed.ok) {
    const field = parsed.error.split(':')[0] ?? '(root)';
    return refuse(400, { error: 'invalid X-Runtime-Info', field: `X-Runtime-Info.${field}`, detail: parsed.error });
  }
  const { id } = parsed.value;
  if (!scope(id)) return refuse(403, { error: 'join token does not admit this runtime id', runtime: id });
  return { ok: true, info: parsed.value, tokenDigest };
}

export function refuse(status: Refusal['status'], body: Refusal['body']): Admission {
  return { ok: false, refusal: { status, body } };
}

/** Answers a refused upgrade with a plain HTTP response on the raw socket, then closes it. */
export function writeRefusal(socket: Duplex, refusal: Refusal): void {
  const body = JSON.stringify(refusal.body);
  const headers = { ...(refusal.status === 401 ? { 'WWW-Authenticate': 'Bearer' } : {}), ...refusal.headers };
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status]}\r\nConnection: close\r\nContent-Type: application/json\r\n` +
      `${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}
