/** A runtime node (design brief §8): sandboxes behind MCP, state reporting and the tunnel dial loop. */
export { startRuntimeNode } from './node.ts';
export type { RuntimeNode } from './node.ts';
export type { RuntimeNodeOptions, RuntimeLogger, TunnelEvent } from './options.ts';
