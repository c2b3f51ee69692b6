import type { Clock } from '@switchyard/clock';
import type { Engine, SandboxInstance } from './engine.ts';
import type { Logger, MeteringSink } from './types.ts';

/** Writes each metering event as one info log line (`event: 'metering'`). The default sink. */
export function logMeteringSink(logger: Logger): MeteringSink {
  return { record: (e) => logger.info({ ...e, event: 'metering', lifecycle: e.event }, `sandbox ${e.event}`) };
}

/**
 * Drops every metering event, for runtimes whose sandbox lifetimes nobody
 * bills or audits (the log sink writes two info lines per sandbox).
 */
export function noMeteringSink(): MeteringSink {
  return { record: () => {} };
}

/**
 * Decorates an engine so every instance reports `start` (on bind, with the
 * time it took to get ready; reason `warm` if it came from a pool) and
 * `recycle` (on destroy, with its lifetime and the destroy reason).
 */
export function withMetering(engine: Engine, sink: MeteringSink, clock: Clock): Engine {
  return {
    async create(ctx) {
      const startedAt = clock.monotonicNow();
      const inner = await engine.create(ctx);
      return meteredInstance(inner, ctx.className, sink, clock, startedAt);
    },
    close: () => engine.close?.() ?? Promise.resolve(),
  };
}

function meteredInstance(
  inner: SandboxInstance,
  className: string,
  sink: MeteringSink,
  clock: Clock,
  startedAt: number,
): SandboxInstance {
  let process = '';
  let boundAt = 0;
  let recycled = false;
  return {
    capabilities: inner.capabilities,
    get dead() {
      return inner.dead;
    },
    onDead: (l) => inner.onDead(l),
    register: (server) => inner.register(server),
    ...(inner.listen ? { listen: inner.listen.bind(inner) } : {}),
    ...(inner.exitCause ? { exitCause: inner.exitCause.bind(inner) } : {}),
    bind(sandboxId) {
      inner.bind(sandboxId);
      process = sandboxId;
      boundAt = clock.monotonicNow();
      const reason = (inner as { warm?: boolean }).warm ? 'warm' : 'created';
      sink.record({ event: 'start', class: className, process, reason, durationMs: boundAt - startedAt });
    },
    async destroy(reason) {
      if (!recycled && process !== '') {
        recycled = true;
        sink.record({
          event: 'recycle',
          class: className,
          process,
          reason,
          durationMs: clock.monotonicNow() - boundAt,
        });
      }
      await inner.destroy(reason);
    },
  };
}
