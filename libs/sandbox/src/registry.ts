import { SwitchyardError } from '@switchyard/protocol';
import type { Clock, Timer } from '@switchyard/clock';
import { ClassTroubleLog } from './class-trouble-log.ts';
import { describeExit, exitFields, type Engine, type EngineContext, type SandboxInstance } from './engine.ts';
import { errorText } from './error-text.ts';
import type { Logger, SandboxTrouble, StateReporter } from './types.ts';

/** One live sandbox and who holds it. */
export interface Sandbox {
  readonly id: string;
  readonly className: string;
  readonly instance: SandboxInstance;
  /** Destroy as soon as the last holder leaves (a sandbox made for one request or session). */
  readonly ephemeral: boolean;
  refs: number;
  expiry: Timer | undefined;
}

export interface ClassRuntime {
  readonly engine: Engine;
  readonly expireMs: number;
}

export interface RegistryOptions {
  readonly runtimeId: string;
  readonly classes: ReadonlyMap<string, ClassRuntime>;
  readonly sandboxesMax: number;
  readonly reporter: StateReporter;
  readonly logger: Logger;
  readonly clock: Clock;
  /** Told of a tool call its client cancelled, with the sandbox's class. */
  readonly onCancelled: (className: string) => void;
  /** Told when a sandbox goes away, so sessions bound to it can be closed. */
  readonly onRemoved: (sandbox: Sandbox) => void;
  /** Told of each sandbox that died on its own (`died`), with its class. */
  readonly onTrouble: (trouble: SandboxTrouble, className: string) => void;
}

/** Ids of sandboxes that died on their own, remembered so the next stateless caller hears of it once. */
const TOMBSTONES_MAX = 1024;

/**
 * Reference-counted sandboxes, bounded by `sandboxesMax`: those alive, those
 * starting and those removed but still being destroyed (a stdio server may
 * take seconds to exit, and it holds its memory until it has). A sandbox is
 * destroyed `expireMs` after its last holder leaves; it is reported to the
 * state store on creation and removal, and the idle weight follows every
 * change.
 */
export class SandboxRegistry {
  readonly #opts: RegistryOptions;
  readonly #sandboxes = new Map<string, Sandbox>();
  /** Live sandboxes of each configured class, kept as they come and go so a scrape need not walk them all. */
  readonly #byClass = new Map<string, number>();
  readonly #creating = new Map<string, Promise<Sandbox>>();
  readonly #tombstones = new Set<string>();
  /** Instances removed and still being destroyed (a child given its grace to exit). */
  readonly #destroying = new Set<Promise<void>>();
  readonly #trouble: ClassTroubleLog;
  #closed = false;

  constructor(opts: RegistryOptions) {
    this.#opts = opts;
    this.#trouble = new ClassTroubleLog(opts.logger, opts.clock);
    for (const className of opts.classes.keys()) this.#byClass.set(className, 0);
    this.#reportWeight();
  }

  get size(): number {
    return this.#sandboxes.size;
  }

  /** Live sandboxes (those `size` counts) of each configured class, every class present, from 0. */
  sizeByClass(): Record<string, number> {
    return Object.fromEntries(this.#byClass);
  }

  get(id: string): Sandbox | undefined {
    return this.#sandboxes.get(id);
  }

  list(): Sandbox[] {
    return [...this.#sandboxes.values()];
  }

  /** Idle weight: sandboxes this runtime can still take. */
  idleWeight(): Record<string, number> {
    return { sandboxes: Math.max(0, this.#opts.sandboxesMax - this.#held()) };
  }

  /**
   * Takes a reference on sandbox `id` of `className`, creating it if needed.
   * Throws `not_found` for an unknown class, `capacity_exhausted` at the
   * limit, `upstream_unavailable` once for a sandbox that died (unless
   * `forgiveDeath`), and a class mismatch as `invalid_request`. With
   * `named` (a client named `id`), a sandbox that is a request's or session's
   * own (ephemeral) is refused as `invalid_request` too: a session's has its
   * id, which the session alone may reach it by.
   */
  async acquire(
    className: string,
    id: string,
    opts: { ephemeral?: boolean; forgiveDeath?: boolean; named?: boolean } = {},
  ) {
    if (this.#closed) throw new SwitchyardError('not_ready', 'runtime is shutting down');
    const cls = this.#opts.classes.get(className);
    if (!cls) throw new SwitchyardError('not_found', `unknown sandbox class "${className}"`);
    if (this.#tombstones.delete(id) && !opts.forgiveDeath) {
      throw new SwitchyardError('upstream_unavailable', `sandbox "${id}" died; the next request creates it again`);
    }
    let sandbox = this.#sandboxes.get(id) ?? (await this.#creating.get(id));
    if (sandbox && (sandbox.instance.dead || !this.#sandboxes.has(id))) sandbox = undefined;
    if (!sandbox) sandbox = await this.#create(className, cls, id, opts.ephemeral ?? false);
    if (opts.named && sandbox.ephemeral) {
      throw new SwitchyardError('invalid_request', `process "${id}" is taken: name another process`);
    }
    if (sandbox.className !== className) {
      // A process id names one sandbox across every class: reusing it for another class is the client's mistake.
      throw new SwitchyardError(
        'invalid_request',
        `sandbox "${id}" is of class "${sandbox.className}", not "${className}": name another process for class "${className}"`,
      );
    }
    sandbox.refs++;
    sandbox.expiry?.cancel();
    sandbox.expiry = undefined;
    return sandbox;
  }

  /**
   * Drops a reference; the last one starts the expiry timer, or ends a session's or request's own
   * (ephemeral) sandbox at once: `ended`, not `expired`, as no expiry passed for it.
   */
  release(sandbox: Sandbox): void {
    if (sandbox.refs > 0) sandbox.refs--;
    if (sandbox.refs > 0 || this.#sandboxes.get(sandbox.id) !== sandbox) return;
    if (sandbox.ephemeral) {
      void this.destroy(sandbox.id, 'ended');
      return;
    }
    const expireMs = this.#opts.classes.get(sandbox.className)?.expireMs ?? 0;
    if (expireMs === 0) {
      void this.destroy(sandbox.id, 'expired');
      return;
    }
    sandbox.expiry = this.#opts.clock.setTimeout(() => void this.destroy(sandbox.id, 'expired'), expireMs);
  }

  /** Removes and frees a sandbox now, whoever holds it; `close()` waits for it too. */
  async destroy(id: string, reason: string): Promise<boolean> {
    const sandbox = this.#sandboxes.get(id);
    if (!sandbox) return false;
    this.#remove(sandbox);
    const destroyed = sandbox.instance.destroy(reason).catch((error: unknown) => {
      this.#opts.logger.warn({ event: 'sandbox.destroy_failed', sandbox: id, err: String(error) }, 'destroy failed');
    });
    // Its place is given back, in the idle weight too, once it is gone, not once it is removed.
    this.#destroying.add(destroyed);
    await destroyed;
    this.#destroying.delete(destroyed);
    this.#reportWeight();
    return true;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.allSettled([...this.#creating.values()]);
    await Promise.all([...this.#sandboxes.keys()].map((id) => this.destroy(id, 'closed')));
    // Those that expired or died just before are still going: a process that
    // exits once close() resolves would leave their children running.
    await Promise.all([...this.#destroying]);
  }

  async #create(className: string, cls: ClassRuntime, id: string, ephemeral: boolean): Promise<Sandbox> {
    const pending = this.#creating.get(id);
    if (pending) return pending;
    if (this.#held() >= this.#opts.sandboxesMax) {
      throw new SwitchyardError('capacity_exhausted', `sandbox limit reached (${this.#opts.sandboxesMax})`);
    }
    const promise = this.#start(className, cls, id, ephemeral);
    this.#creating.set(id, promise);
    this.#reportWeight();
    try {
      return await promise;
    } finally {
      this.#creating.delete(id);
      this.#reportWeight();
    }
  }

  async #start(className: string, cls: ClassRuntime, id: string, ephemeral: boolean): Promise<Sandbox> {
    const { runtimeId, logger, onCancelled } = this.#opts;
    const ctx: EngineContext = { runtimeId, className, logger, onCancelled: () => onCancelled(className) };
    let instance: SandboxInstance;
    try {
      instance = await cls.engine.create(ctx);
    } catch (error) {
      this.#trouble.warn(
        { event: 'sandbox.start_failed', class: className, sandbox: id, err: errorText(error), ...exitFields(error) },
        'start failed',
      );
      throw new SwitchyardError('upstream_unavailable', `sandbox "${id}" could not start`, { cause: error });
    }
    instance.bind(id);
    const sandbox: Sandbox = { id, className, instance, ephemeral, refs: 0, expiry: undefined };
    if (this.#closed) {
      await instance.destroy('closed');
      throw new SwitchyardError('not_ready', 'runtime is shutting down');
    }
    // One that died before its death was heard is replaced here, and never removed: it is counted out now.
    const replaced = this.#sandboxes.get(id);
    if (replaced) this.#count(replaced.className, -1);
    this.#sandboxes.set(id, sandbox);
    this.#count(className, +1);
    this.#opts.reporter.addProcess(id);
    instance.onDead(() => this.#died(sandbox));
    logger.debug({ event: 'sandbox.created', class: className, sandbox: id }, 'sandbox created');
    return sandbox;
  }

  #died(sandbox: Sandbox): void {
    if (this.#sandboxes.get(sandbox.id) !== sandbox) return;
    this.#opts.onTrouble('died', sandbox.className);
    // Its exit code or signal and last stderr lines are what tells an operator why.
    const exit = sandbox.instance.exitCause?.();
    this.#trouble.warn(
      { event: 'sandbox.died', class: sandbox.className, sandbox: sandbox.id, ...exit },
      exit ? `sandbox died: its server ${describeExit(exit)}` : 'sandbox died',
    );
    if (this.#tombstones.size >= TOMBSTONES_MAX) this.#tombstones.delete(this.#tombstones.values().next().value!);
    this.#tombstones.add(sandbox.id);
    void this.destroy(sandbox.id, 'dead');
  }

  #remove(sandbox: Sandbox): void {
    sandbox.expiry?.cancel();
    sandbox.expiry = undefined;
    this.#sandboxes.delete(sandbox.id);
    this.#count(sandbox.className, -1);
    this.#opts.reporter.removeProcess(sandbox.id);
    this.#opts.onRemoved(sandbox);
  }

  #count(className: string, by: 1 | -1): void {
    this.#byClass.set(className, (this.#byClass.get(className) ?? 0) + by);
  }

  /** Sandboxes counted against `sandboxesMax`: alive, starting, and still being destroyed. */
  #held(): number {
    return this.#sandboxes.size + this.#creating.size + this.#destroying.size;
  }

  #reportWeight(): void {
    this.#opts.reporter.setIdleWeight(this.idleWeight());
  }
}
