import type { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type http2 from 'node:http2';
import type { Clock } from '@switchyard/clock';
import { SCHEDULER_API_REALM } from '@switchyard/protocol';
import { watchTokenRevocations } from '@switchyard/service';
import { bearerMatches, tokenMatches } from '@switchyard/tunnel';
import { endSocketWithJson } from './http-util.ts';

/**
 * The scheduler API's own credentials (`apiTokens`): gateways present one as
 * `Authorization: Bearer`, a browser on the live page as the password of
 * HTTP Basic (any user name), since it cannot send a bearer token. Without
 * `tokens` every caller is let in, as on a cluster network no one else
 * reaches; with them, a list that is empty for now (a token file emptied,
 * missing, or of unusable lines) lets no one in: the API never opens by
 * accident.
 */
export interface ApiAdmission {
  admits(authorization: string | undefined): boolean;
  /**
   * Keeps what `authorization` let in (a relay connection, an event stream:
   * they run for hours) until `closer` emits 'close', and calls `end` if
   * its token is removed from `apiTokens` meanwhile. Nothing without tokens.
   */
  hold(authorization: string | undefined, closer: EventEmitter, end: () => void): void;
  /** Stops watching the tokens; ends nothing. */
  close(): void;
}

export function apiAdmission(
  tokens: (() => readonly string[]) | undefined,
  clock: Clock,
  onRevoked: (ended: number) => void,
): ApiAdmission {
  const admits = (authorization: string | undefined): boolean => {
    if (!tokens) return true;
    const accepted = tokens();
    if (bearerMatches(authorization, accepted)) return true;
    const password = basicPassword(authorization);
    return password !== undefined && tokenMatches(password, accepted);
  };
  const revocations = tokens ? watchTokenRevocations({ tokens, clock, onRevoked }) : undefined;
  return {
    admits,
    hold(authorization, closer, end) {
      if (!revocations) return;
      closer.once(
        'close',
        revocations.hold(() => admits(authorization), end),
      );
    },
    close: () => revocations?.close(),
  };
}

function basicPassword(authorization: string | undefined): string | undefined {
  const basic = /^Basic\s+([A-Za-z0-9+/]+={0,2})\s*$/i.exec(authorization ?? '');
  if (!basic) return undefined;
  const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : decoded.slice(colon + 1);
}

const REFUSAL = { error: 'missing or invalid API token', code: 'unauthorized' } as const;
const REFUSAL_TEXT = JSON.stringify(REFUSAL);
const REALM = `realm="${SCHEDULER_API_REALM}"`;

/** 401 for an HTTP/1.1 request; the live page's challenge is Basic, so that a browser asks for the token. */
export function refuseRequest(res: ServerResponse, path: string): void {
  res.writeHead(401, {
    'www-authenticate': path.startsWith('/ui') ? `Basic ${REALM}, charset="UTF-8"` : `Bearer ${REALM}`,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(REFUSAL_TEXT),
    'cache-control': 'no-store',
  });
  res.end(REFUSAL_TEXT);
}

/** 401 for an upgrade request (a relay connection), then the socket closes. */
export function refuseUpgrade(socket: Duplex): void {
  endSocketWithJson(socket, 401, REFUSAL, { 'WWW-Authenticate': `Bearer ${REALM}` });
}

/** 401 for an HTTP/2 stream (an event stream a gateway opens). */
export function refuseStream(stream: http2.ServerHttp2Stream): void {
  stream.on('error', () => {});
  stream.respond({
    ':status': 401,
    'www-authenticate': `Bearer ${REALM}`,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(REFUSAL_TEXT),
  });
  stream.end(REFUSAL_TEXT);
}
