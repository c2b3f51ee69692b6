import { StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Engine } from './engine.ts';
import { ProxyInstance, upstreamClient } from './proxy.ts';
import type { EngineConfig } from './types.ts';

type HttpConfig = Extract<EngineConfig, { engine: 'http' }>;

/**
 * Proxies to a remote Streamable HTTP MCP server: one upstream session per
 * sandbox, with the configured headers on every request. A lost upstream
 * session (the transport closes) marks the sandbox dead.
 */
export function httpEngine(config: HttpConfig): Engine {
  const url = new URL(config.url);
  return {
    async create() {
      const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { ...config.headers } } });
      const client = upstreamClient();
      await client.connect(transport);
      return new ProxyInstance(client, transport, async () => {
        await transport.terminateSession().catch(() => undefined);
        await transport.close().catch(() => undefined);
      });
    },
  };
}
