/**
 * `switchyard check gateway`: whether a gateway serves, for a chart's `helm
 * test` and for scripts. `/readyz` must answer 200, and an MCP `initialize`
 * POST to its `/mcp` URL either 200 with an initialize result (which takes a
 * runtime serving the gateway's default class: scheduling and the tunnel are
 * on its way) and the session it opened is ended at once, or, where the
 * caller says client auth is on, 401 with a Bearer challenge (the gateway
 * serves; nothing behind it is reached). A scheduler's address is told apart
 * (its 404, or its API tokens' 401 of its own realm), and so is a runtime's
 * direct listener (its tokens' 401 of its own realm), and each is said to be
 * no gateway's. Each request is bounded by a timeout.
 */
import { RUNTIME_DIRECT_REALM, SCHEDULER_API_REALM } from '@switchyard/protocol';
import { printable } from './log-lines.ts';
import { httpRequest, type HttpInit } from './http-request.ts';
import { unreachableReason } from './inspect.ts';

export interface GatewayCheck {
  /** The gateway's MCP URL, e.g. http://switchyard-gateway.ns.svc:80/mcp. */
  readonly url: string;
  /** Client auth is on (auth.mode bearer or jwt): expect 401 with a challenge, and refuse a 200. */
  readonly authRequired: boolean;
}

const REQUEST_TIMEOUT_MS = 10_000;
/** An initialize answer is a few hundred bytes; what is read of any answer stops here. */
const ANSWER_BYTES_MAX = 64 * 1024;
/** A version every legacy-session gateway takes, and that keeps the check a plain request and answer. */
const PROTOCOL_VERSION = '2025-06-18';
const REFUSED_HINT = 'nothing listens there';
const SCHEDULER_HINT = "(a scheduler's address goes to check scheduler --scheduler)";
const RUNTIME_HINT = '(runtimes are seen through a scheduler: status --scheduler)';

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: {
    protocolVersion: PROTOCOL_VERSION,
    capabilities: {},
    clientInfo: { name: 'switchyard-check', version: '1' },
  },
});

async function request(url: URL, init: HttpInit = {}): Promise<Response> {
  try {
    return await httpRequest(url, { ...init, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  } catch (error) {
    throw new Error(`cannot reach ${url.origin}: ${unreachableReason(error, REFUSED_HINT)}`, {
      cause: error,
    });
  }
}

/** The start of `response`'s body as text, at most ANSWER_BYTES_MAX bytes; the rest is not waited for. */
async function answerText(response: Response): Promise<string> {
  if (!response.body) return '';
  // An SSE answer's first event is the initialize result; the stream may stay open after it.
  const sse = (response.headers.get('content-type') ?? '').includes('text/event-stream');
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  try {
    while (text.length < ANSWER_BYTES_MAX && !(sse && /\r?\n\r?\n/.test(text))) {
      const { done, value } = await reader.read();
      if (done) break;
      text += value;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return text.slice(0, ANSWER_BYTES_MAX);
}

/** The JSON-RPC message in an answer: the body itself (JSON), or the data of its first SSE event. */
function messageOf(text: string, contentType: string): unknown {
  const json = contentType.includes('text/event-stream')
    ? text
        .split(/\r?\n\r?\n/)
        .map((event) =>
          event
            .split(/\r?\n/)
            .filter((line) => line.startsWith('data:'))
            .map((line) => line.slice(5).trimStart())
            .join('\n'),
        )
        .find((data) => data !== '')
    : text;
  try {
    return json === undefined ? undefined : (JSON.parse(json) as unknown);
  } catch {
    return undefined;
  }
}

function isJsonRpc(message: unknown): boolean {
  return (message as { jsonrpc?: unknown } | undefined)?.jsonrpc === '2.0';
}

/** A short printable account of an answer that is not the one wanted: its JSON-RPC or API error, else its start. */
function described(response: Response, text: string): string {
  const message = messageOf(text, response.headers.get('content-type') ?? '') as
    { error?: { message?: unknown } | string } | undefined;
  const error = message?.error;
  const reason = typeof error === 'string' ? error : typeof error?.message === 'string' ? error.message : text.trim();
  const short = reason.length > 200 ? `${reason.slice(0, 200)}…` : reason;
  return printable(`HTTP ${response.status}${short ? `: ${short}` : ''}`);
}

/**
 * Says so when `response` is a 401 with the challenge of a scheduler's API tokens or of a runtime's direct
 * listener (a gateway's is realm="switchyard"): neither is a gateway refusing a client, nor a credential missing.
 */
function refuseOtherListener(response: Response, where: string): void {
  if (response.status !== 401) return;
  const realm = challengeRealm(response.headers.get('www-authenticate') ?? '');
  if (realm === SCHEDULER_API_REALM) {
    throw new Error(
      `${where} answered 401 with a scheduler's challenge (realm ${SCHEDULER_API_REALM}): ` +
        `it is no gateway's MCP endpoint ${SCHEDULER_HINT}`,
    );
  }
  if (realm === RUNTIME_DIRECT_REALM) {
    throw new Error(
      `${where} answered 401 with a runtime's challenge (realm ${RUNTIME_DIRECT_REALM}): ` +
        `it is a runtime's direct listener, no gateway's MCP endpoint ${RUNTIME_HINT}`,
    );
  }
}

async function checkReady(url: URL): Promise<void> {
  const readyz = new URL('/readyz', url);
  const response = await request(readyz);
  const text = await answerText(response);
  // A runtime's direct listener asks for its token before any route, /readyz too.
  refuseOtherListener(response, printable(readyz.href));
  if (response.status !== 200) throw new Error(`${readyz.href} answered ${described(response, text)}`);
}

/** Resolves with a line saying what answered; rejects with what did not, and why. */
export async function checkGateway(check: GatewayCheck): Promise<string> {
  const url = new URL(check.url);
  await checkReady(url);
  const response = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: INITIALIZE,
  });
  const text = await answerText(response);
  const where = printable(url.href);
  if (response.status === 401) {
    const challenge = response.headers.get('www-authenticate') ?? '';
    // A scheduler with API tokens refuses its /mcp (no route of its) before routing, with a Bearer challenge of
    // its own realm: neither "client auth is on" nor a pass for auth.
    refuseOtherListener(response, where);
    if (!check.authRequired) {
      throw new Error(`${where} asks for credentials (401): its client auth is on; check it with --auth-required`);
    }
    if (!/^Bearer\b/i.test(challenge)) throw new Error(`${where} answered 401 without a Bearer challenge`);
    return `gateway ok: /readyz 200, and ${where} asks for credentials (401, ${printable(challenge.slice(0, 200))})`;
  }
  if (response.status === 404 && !isJsonRpc(messageOf(text, response.headers.get('content-type') ?? ''))) {
    // A gateway answers every 404 of its MCP endpoint with a JSON-RPC error; one without is from something else.
    throw new Error(
      `${where} answered 404 for ${printable(url.pathname)}: is this a gateway's MCP endpoint? ${SCHEDULER_HINT}`,
    );
  }
  if (response.status !== 200) throw new Error(`initialize at ${where} answered ${described(response, text)}`);
  if (check.authRequired) {
    throw new Error(`${where} answered initialize without credentials, though client auth is on`);
  }
  const result = (messageOf(text, response.headers.get('content-type') ?? '') as { result?: unknown } | undefined)
    ?.result as { protocolVersion?: unknown; serverInfo?: { name?: unknown } } | undefined;
  if (typeof result?.protocolVersion !== 'string') {
    throw new Error(`${where} answered initialize 200 with no initialize result: it may be no MCP server`);
  }
  await endSession(url, response.headers.get('mcp-session-id'));
  const server = typeof result.serverInfo?.name === 'string' ? `${result.serverInfo.name}, ` : '';
  return printable(
    `gateway ok: /readyz 200, initialize 200 at ${url.href} (${server}protocol ${result.protocolVersion})`,
  );
}

/** The realm a `WWW-Authenticate` challenge names (quoted or not), lowercased; undefined for none. */
function challengeRealm(challenge: string): string | undefined {
  return /\brealm="?([^",\s]*)/i.exec(challenge)?.[1]?.toLowerCase();
}

/** Ends the session initialize opened, so that every check does not hold a sandbox until it idles out. */
async function endSession(url: URL, sessionId: string | null): Promise<void> {
  if (sessionId === null) return;
  const response = await request(url, {
    method: 'DELETE',
    headers: { 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL_VERSION },
  }).catch(() => undefined);
  await response?.body?.cancel();
}
