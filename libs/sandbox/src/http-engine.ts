import { StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Clock } from '@switchyard/clock';
import { MCP_SESSION_HEADER } from '@switchyard/protocol';
import { anyPortFetch } from '@switchyard/service';
import { boundedFetch } from './bounded-fetch.ts';
import { ClassTroubleLog } from './class-trouble-log.ts';
import { UPSTREAM_MESSAGE_BYTES_MAX, type Engine } from './engine.ts';
import { ProxyInstance, connectUpstream, upstreamClient } from './proxy.ts';
import type { EngineConfig, SandboxTrouble } from './types.ts';

type HttpConfig = Extract<EngineConfig, { engine: 'http' }>;

/** How long ending an upstream session (its DELETE) may take before it is abandoned. */
const END_SESSION_WAIT_MS = 2_000;

/**
 * Proxies to a remote Streamable HTTP MCP server: one upstream session per
 * sandbox, with the configured headers on every request. A lost upstream
 * session (a request on it answered 404, or the transport closes) marks the
 * sandbox dead. Destroying the
 * sandbox ends its upstream session (DELETE), as does a start that fails
 * after the upstream opened one (its `initialized` notification refused, a
 * protocol version we do not speak): the upstream would otherwise hold it
 * until its own idle timeout, one per sandbox. A start fails when the upstream
 * does not answer `initialize` within `startTimeoutSeconds`. The DELETE is abandoned after
 * END_SESSION_WAIT_MS; an upstream that does not answer it is not waited for.
 * An answer (a JSON body, an SSE event) past UPSTREAM_MESSAGE_BYTES_MAX is
 * cut (see boundedFetch): its request fails, the class is warned of
 * (throttled, see ClassTroubleLog), and each cut is told to `onTrouble`.
 */
export function httpEngine(
  config: HttpConfig,
  startTimeoutSeconds: number,
  clock: Clock,
  onTrouble: (trouble: SandboxTrouble, className: string) => void,
): Engine {
  const url = new URL(config.url);
  const requestInit = { headers: { ...config.headers } };
  let trouble: ClassTroubleLog | undefined;
  return {
    async create(ctx) {
      trouble ??= new ClassTroubleLog(ctx.logger, clock);
      const bytesMax = UPSTREAM_MESSAGE_BYTES_MAX;
      // Not the global fetch, which refuses a server on a port browsers block (6000, 10080, …).
      const bounded = boundedFetch(anyPortFetch, bytesMax, (kind) => {
        onTrouble('answer_too_large', ctx.className);
        trouble!.warn(
          { event: 'sandbox.answer_too_large', class: ctx.className, kind, bytesMax },
          kind === 'json'
            ? 'an upstream answer was too large: its request failed'
            : 'an upstream event was too large: its stream was ended',
        );
      });
      // A 404 to a request naming our session: the upstream lost it (it restarted, or expired it).
      // The SDK transport reports the error but stays open, so every later request would fail the
      // same way and the sandbox never die; closed, it dies, and its client starts over elsewhere.
      const fetchSeeingLoss: typeof fetch = async (input, init) => {
        const response = await bounded(input, init);
        if (response.status === 404 && new Headers(init?.headers).has(MCP_SESSION_HEADER)) void transport.close();
        return response;
      };
      const transport = new StreamableHTTPClientTransport(url, { requestInit, fetch: fetchSeeingLoss });
      const client = upstreamClient();
      try {
        await connectUpstream(client, transport, startTimeoutSeconds);
      } catch (error) {
        // The SDK client closed the transport; what the upstream opened is ended here.
        await transport.close().catch(() => undefined);
        await endSession(url, requestInit, transport, bounded);
        throw error;
      }
      const cleanup = async (): Promise<void> => {
        await transport.close().catch(() => undefined);
        await endSession(url, requestInit, transport, bounded);
      };
      return new ProxyInstance(client, transport, cleanup, { onCancelled: ctx.onCancelled, clock });
    },
  };
}

/**
 * Sends the DELETE that ends `closed`'s upstream session, if it has one, on
 * a transport of its own: a closed transport's requests are aborted before
 * they are sent (the SDK client closes it first, on destroy and on a failed
 * start alike). A refusal or a failure is no error: the session is gone or
 * expires upstream.
 */
async function endSession(
  url: URL,
  requestInit: RequestInit,
  closed: StreamableHTTPClientTransport,
  fetch: typeof globalThis.fetch,
): Promise<void> {
  const sessionId = closed.sessionId;
  if (sessionId === undefined) return;
  const ender = new StreamableHTTPClientTransport(url, { requestInit, sessionId, fetch });
  if (closed.protocolVersion !== undefined) ender.setProtocolVersion(closed.protocolVersion);
  let timer: NodeJS.Timeout | undefined;
  try {
    await ender.start();
    await Promise.race([
      ender.terminateSession().catch(() => undefined),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, END_SESSION_WAIT_MS))),
    ]);
  } finally {
    clearTimeout(timer);
    // Aborts a DELETE still waiting for its answer.
    await ender.close().catch(() => undefined);
  }
}
