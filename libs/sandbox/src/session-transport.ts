import { type McpServer, WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';

/**
 * A legacy session's SDK transport that knows whether its client has an
 * event stream (a `GET`) open, which the SDK does not say: a server→client
 * request sent with none open is stored for a resume and otherwise lost,
 * the sender left waiting for an answer that cannot come.
 */
export class SessionTransport extends WebStandardStreamableHTTPServerTransport {
  #eventStreams = 0;

  /** Counts a `GET` being answered (the session's stream, or a resume) until the returned close is called; idempotent. */
  openEventStream(): () => void {
    this.#eventStreams++;
    let open = true;
    return () => {
      if (open) this.#eventStreams--;
      open = false;
    };
  }

  get eventStreamOpen(): boolean {
    return this.#eventStreams > 0;
  }
}

/** True when the session `server` serves has a `GET` stream open (always for a server on another transport). */
export function hasEventStream(server: McpServer): boolean {
  const transport = server.server.transport;
  return !(transport instanceof SessionTransport) || transport.eventStreamOpen;
}
