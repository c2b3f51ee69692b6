import type { Engine, EngineContext, SandboxInstance } from './engine.ts';

/**
 * Decorates an engine with `size` pre-started instances. `create` hands out
 * a ready instance when one is waiting (marked `warm`) and refills the pool
 * in the background; otherwise it starts one as usual. Pool members are not
 * sandboxes yet: they are bound to an id only when handed out, so they are
 * not reported nor counted in idle weight. A member that dies while waiting
 * is dropped and replaced.
 *
 * Not guaranteed: a hit under a burst larger than `size`.
 */
export interface WarmPoolEngine extends Engine {
  /** Ready members waiting to be handed out. */
  readonly available: number;
  close(): Promise<void>;
}

export function withWarmPool(engine: Engine, size: number, ctx: EngineContext): WarmPoolEngine {
  const pool: SandboxInstance[] = [];
  const starting = new Set<Promise<void>>();
  let closed = false;
  const refill = (): void => {
    while (!closed && pool.length + starting.size < size) {
      const started: Promise<void> = engine
        .create(ctx)
        .then(
          async (instance) => {
            if (closed) return instance.destroy('closed');
            instance.onDead(() => {
              const at = pool.indexOf(instance);
              if (at >= 0) pool.splice(at, 1);
              refill();
            });
            pool.push(instance);
          },
          (error: unknown) =>
            ctx.logger.warn(
              { event: 'pool.start_failed', class: ctx.className, err: String(error) },
              'warm start failed',
            ),
        )
        .finally(() => void starting.delete(started));
      starting.add(started);
    }
  };

  refill();
  return {
    async create(requestCtx) {
      const instance = pool.shift();
      refill();
      if (instance && !instance.dead) {
        (instance as { warm?: boolean }).warm = true;
        return instance;
      }
      return engine.create(requestCtx);
    },
    get available() {
      return pool.length;
    },
    async close() {
      if (closed) return;
      closed = true;
      // Members still starting destroy themselves on arrival; wait for them.
      await Promise.all([...starting]);
      await Promise.all(pool.splice(0).map((i) => i.destroy('closed')));
      await engine.close?.();
    },
  };
}
