import { Client } from '@modelcontextprotocol/client';
import { InMemoryTransport, type CallToolResult } from '@modelcontextprotocol/server';
import type { Sandbox } from './registry.ts';
import { serverFor } from './endpoint.ts';
import { UPSTREAM_TIMEOUT_MS } from './proxy.ts';
import type { ToolCallCounting } from './tool-calls.ts';

/**
 * Calls a tool of a sandbox in process, through a linked in-memory SDK
 * client/server pair, so every engine answers REST calls exactly as it
 * answers MCP clients, and is counted as theirs are. A call may run for UPSTREAM_TIMEOUT_MS (10 min), as
 * one over MCP to a proxied server may, then fails with the SDK's
 * RequestTimeout; without it the SDK's default 60 s cut long tools short.
 */
export async function callSandboxTool(
  sandbox: Sandbox,
  toolCalls: ToolCallCounting | undefined,
  name: string,
  args: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<CallToolResult> {
  const { server, detach } = serverFor(sandbox, toolCalls);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'switchyard-rest', version: '0.1.0' });
  try {
    await server.connect(serverSide);
    await client.connect(clientSide);
    return (await client.callTool(
      { name, arguments: args },
      { signal, timeout: UPSTREAM_TIMEOUT_MS },
    )) as CallToolResult;
  } finally {
    detach();
    await client.close().catch(() => undefined);
    await server.close().catch(() => undefined);
  }
}
