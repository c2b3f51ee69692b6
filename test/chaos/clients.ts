// The SDK v2 client as the chaos and soak suites use it: legacy sessions
// (the SDK's default era) over Streamable HTTP, with extra request headers.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

export type McpClient = Client;

/** Connects a legacy-session SDK v2 client to `url` (initialize + initialized). */
export async function connectLegacy(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'switchyard-reliability', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

/** Ends the session with DELETE (so both ends free it now), then closes the client. */
export async function endSession(client: Client): Promise<void> {
  try {
    await (client.transport as StreamableHTTPClientTransport | undefined)?.terminateSession();
  } finally {
    await client.close();
  }
}

/** The concatenated text content of a tool result. */
export function textOf(result: unknown): string {
  const content = (result as { content?: Array<{ text?: string }> }).content ?? [];
  return content.map((c) => c.text ?? '').join('');
}
