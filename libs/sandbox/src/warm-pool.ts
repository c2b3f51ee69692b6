import type { Clock, Timer } from '@switchyard/clock';
import { exitFields, type Engine, type EngineContext, type SandboxInstance } from './engine.ts';
import { errorText } from './error-text.ts';

/**
 * Decorates an engine with `size` pre-started instances, each primed (see
 * `SandboxInstance.prime`) before it waits. `create` hands out
 * a ready instance when one is waiting (marked `warm`) and refills the pool
 * `refillDelayMs` later; otherwise it starts one as usual. Pool members are
 * not sandboxes yet: they are bound to an id only when handed out, so they
 * are not reported nor counted in idle weight. A member that dies while
 * waiting is destroyed (freeing what it still holds: an http member's
 * upstream session, a stdio member's process group) and replaced at once,
 * unless it died young (within DIED_YOUNG_MS of being ready): a server that
 * exits soon after every start would otherwise be started again and again,
 * a core busy for nothing. Its
 * replacement then waits, 1 s doubling to 1 min while members keep dying
 * young; so does the next refill after starts that failed (a server that
 * exits before it answers), while starts keep failing. The death of a
 * member already handed out changes nothing here: the pool refilled at its
 * hand-out, and a refill waiting out a delay or a backoff keeps waiting.
 *
 * Why the refill waits: starting a child (fork, exec, runtime boot) takes a
 * core for hundreds of milliseconds; started at hand-out, it competes with
 * the new session's first requests, which are what the pool is for.
 *
 * Not guaranteed: a hit under a burst larger than `size`, or for a session
 * that arrives within `refillDelayMs` plus a start time after `size` others.
 */
/** A member that dies this soon after it was ready died young. */
const DIED_YOUNG_MS = 5_000;
const RESPAWN_INITIAL_MS = 1_000;
const RESPAWN_MAX_MS = 60_000;

export interface WarmPoolEngine extends Engine {
  /** Ready members waiting to be handed out. */
  readonly available: number;
  close(): Promise<void>;
}

export interface WarmPoolOptions {
  readonly size: number;
  /** Wait after a hand-out before starting its replacement. */
  readonly refillDelayMs: number;
  readonly clock: Clock;
}

export function withWarmPool(engine: Engine, opts: WarmPoolOptions, ctx: EngineContext): WarmPoolEngine {
  const { size, refillDelayMs, clock } = opts;
  const pool: SandboxInstance[] = [];
  const starting = new Set<Promise<void>>();
  let refillTimer: Timer | undefined;
  let closed = false;
  /** Members that died young in a row (none lived DIED_YOUNG_MS since). */
  let diedYoung = 0;
  /** Refills whose starts failed, in a row (no start succeeded since). */
  let failedRefills = 0;
  const refill = (): void => {
    refillTimer?.cancel();
    refillTimer = undefined;
    while (!closed && pool.length + starting.size < size) {
      const started: Promise<void> = engine
        .create(ctx)
        .then(
          async (instance) => {
            failedRefills = 0;
            await instance
              .prime?.()
              .catch((error: unknown) =>
                ctx.logger.debug(
                  { event: 'pool.prime_failed', class: ctx.className, err: String(error) },
                  'warm prime failed',
                ),
              );
            if (closed) return instance.destroy('closed');
            const readyAt = clock.monotonicNow();
            instance.onDead(() => {
              // One handed out is a sandbox of its own: its death is the registry's, and the
              // pool, refilled at its hand-out, keeps the wait it has (a delay, a backoff).
              const at = pool.indexOf(instance);
              if (at < 0) return;
              pool.splice(at, 1);
              // Dead is not freed: an http member still holds its upstream session, a stdio one its process group.
              void instance
                .destroy('dead')
                .catch((error: unknown) =>
                  ctx.logger.debug(
                    { event: 'pool.destroy_failed', class: ctx.className, err: String(error) },
                    'destroying a dead warm sandbox failed',
                  ),
                );
              const livedMs = clock.monotonicNow() - readyAt;
              if (livedMs >= DIED_YOUNG_MS) {
                diedYoung = 0;
                return refill();
              }
              const retryInMs = Math.min(RESPAWN_INITIAL_MS * 2 ** diedYoung++, RESPAWN_MAX_MS);
              ctx.logger.warn(
                { event: 'pool.died_young', class: ctx.className, livedMs, retryInMs, ...instance.exitCause?.() },
                'warm sandbox exited soon after it started; starting its replacement later',
              );
              refillAfter(retryInMs);
            });
            pool.push(instance);
          },
          (error: unknown) => {
            // A server that exits before it answers fails every start: the
            // next refill waits, or each hand-out would start `size` more.
            let retryInMs: number | undefined;
            if (!closed && !refillTimer) {
              retryInMs = Math.min(RESPAWN_INITIAL_MS * 2 ** failedRefills++, RESPAWN_MAX_MS);
              refillTimer = clock.setTimeout(refill, retryInMs);
            }
            ctx.logger.warn(
              {
                event: 'pool.start_failed',
                class: ctx.className,
                err: errorText(error),
                retryInMs,
                ...exitFields(error),
              },
              'warm start failed',
            );
          },
        )
        .finally(() => void starting.delete(started));
      starting.add(started);
    }
  };
  /** One pending refill at a time: later hand-outs (and deaths) ride the same timer. */
  const refillAfter = (delayMs: number): void => {
    if (closed || refillTimer) return;
    if (delayMs <= 0) return refill();
    refillTimer = clock.setTimeout(refill, delayMs);
  };
  const refillLater = (): void => refillAfter(refillDelayMs);

  refill();
  return {
    async create(requestCtx) {
      const instance = pool.shift();
      refillLater();
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
      refillTimer?.cancel();
      refillTimer = undefined;
      // Members still starting destroy themselves on arrival; wait for them.
      await Promise.all([...starting]);
      await Promise.all(pool.splice(0).map((i) => i.destroy('closed')));
      await engine.close?.();
    },
  };
}
