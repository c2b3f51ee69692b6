import { hostname } from 'node:os';
import { startRuntimeNode } from '@switchyard/runtime';
import type { EngineConfig } from '@switchyard/sandbox';
import { createLogger, createMetrics } from '@switchyard/service';
import { everythingEngine } from './local-cluster.ts';

export interface JoinOptions {
  readonly schedulerUrl: string;
  readonly token: string;
  readonly id?: string;
  /** `demo` (builtin tools) and `everything` (the reference server) are known here; use switchyard-runtime for more. */
  readonly classes: readonly string[];
  readonly sandboxesMax: number;
}

const KNOWN: Record<string, () => EngineConfig> = {
  demo: () => ({ engine: 'builtin' }),
  everything: everythingEngine,
};

/** `switchyard runtime join`: a runtime on this machine, joined to a scheduler, until Ctrl-C. */
export async function joinRuntime(options: JoinOptions): Promise<void> {
  const classes: Record<string, EngineConfig> = {};
  for (const name of options.classes) {
    const make = KNOWN[name];
    if (!make) throw new Error(`unknown class ${name}: known here are ${Object.keys(KNOWN).join(', ')}`);
    classes[name] = make();
  }
  const logger = createLogger({ name: 'runtime', level: 'info' });
  const node = await startRuntimeNode({
    runtimeId: options.id ?? hostname(),
    schedulerUrl: options.schedulerUrl,
    joinToken: options.token,
    classes,
    sandboxesMax: options.sandboxesMax,
    sessionIdleMs: 30 * 60_000,
    logger,
    metrics: createMetrics('runtime'),
  });
  process.stderr.write(`switchyard: runtime ${node.runtimeId} dialling ${options.schedulerUrl} (Ctrl-C to stop)\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await node.close();
}
