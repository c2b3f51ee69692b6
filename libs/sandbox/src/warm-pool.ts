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
export function withWarmPool(engine: Engine, size: number, ctx: EngineContext): Engine & { ready(): Promise<void> } {
  const pool: SandboxInstance[] = [];
  let starting = 0;
  let closed = false;
  let waiters: (() => void)[] = [];

  const settle = (): void => {
    if (starting > 0) return;
    const w = waiters;
    waiters = [];
    for (const resolve of w) resolve();
  };

  const refill = (): void => {
    while (!closed && pool.length + starting < size) {
      starting++;
      engine
        .create(ctx)
        .then(
          (instance) => {
            if (closed) return void instance.destroy('closed');
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
        .finally(() => {
          starting--;
          settle();
        });
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
    /** Resolves once no pool member is still starting (for tests and benches). */
    ready: () => (starting === 0 ? Promise.resolve() : new Promise<void>((resolve) => waiters.push(resolve))),
    async close() {
      if (closed) return;
      closed = true;
      await Promise.all(pool.splice(0).map((i) => i.destroy('closed')));
      await engine.close?.();
    },
  };
}
