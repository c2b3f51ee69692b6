import { Client } from '@modelcontextprotocol/client';
import { InMemoryTransport, type CallToolResult } from '@modelcontextprotocol/server';
import type { Sandbox } from './registry.ts';
import { serverFor } from './endpoint.ts';

/**
 * Calls a tool of a sandbox in process, through a linked in-memory SDK
 * client/server pair, so every engine answers REST calls exactly as it
 * answers MCP clients.
 */
export async function callSandboxTool(
  sandbox: Sandbox,
  name: string,
  args: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<CallToolResult> {
  const { server, detach } = serverFor(sandbox);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'switchyard-rest', version: '0.1.0' });
  try {
    await server.connect(serverSide);
    await client.connect(clientSide);
    return (await client.callTool({ name, arguments: args }, { signal })) as CallToolResult;
  } finally {
    detach();
    await client.close().catch(() => undefined);
    await server.close().catch(() => undefined);
  }
}
