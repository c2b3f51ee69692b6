import type { Clock } from '@switchyard/clock';
import type { Runtime, RuntimeState, WatchSnapshot } from '@switchyard/protocol';
import { RuntimeMirror, watchRuntime, type RuntimeMirrorOptions, type RuntimeWatcher } from '@switchyard/agent';
import type { Tunnel } from '@switchyard/tunnel';
import type { ReplicaLogger } from './options.ts';
import { RedialWaits, type RedialOutcome } from './redial-waits.ts';
import { RUNTIME_STATE_DEFAULTS } from './runtime-state-limits.ts';

interface Entry {
  readonly tunnel: Tunnel;
  readonly mirror: RuntimeMirror;
  readonly watcher: RuntimeWatcher;
  /** False until the first `/watch` snapshot arrived: the runtime is not schedulable before. */
  synced: boolean;
  /**
   * True from a state refused past the limits until a snapshot within them is taken: what the mirror
   * holds meanwhile is older than what the runtime reports, so no new sandbox is placed by it. The runtime
   * is reported full (no idle weight), not gone: it still serves, so what it holds goes on there, and it
   * stays live, so its id stays claimed by its join token at the other replicas.
   */
  overLimits: boolean;
  /** Counts mirror changes, so `state` is rebuilt only when something changed. */
  changes: number;
  /**
   * The last state handed out. Epoch sync merges and diffs by object
   * identity first, so an unchanged runtime must keep its object.
   */
  cached: { readonly changes: number; readonly closed: boolean; readonly state: RuntimeState } | undefined;
}

export interface LocalPartOptions {
  readonly replicaId: string;
  readonly replicaUrl: string;
  readonly clock: Clock;
  readonly logger: ReplicaLogger;
  /** Called after any change of the part (a runtime joined or left, or its state changed). */
  readonly onChange: () => void;
  readonly watchReconnectMs?: number;
  /**
   * What one runtime may report (see RuntimeMirror); a runtime past them takes no new sandbox until it
   * reports less (what it holds goes on there). Default RUNTIME_STATE_DEFAULTS: what the reference
   * runtime's own store holds at most.
   */
  readonly mirror?: Pick<RuntimeMirrorOptions, 'processesMax' | 'threadsMax'>;
  /** Called when the wait for a runtime whose tunnel was lost here ends (not when the part closes). */
  readonly onRedialWaitEnded?: (outcome: RedialOutcome) => void;
  /** Called when a tunnel is closed because its runtime left it for another replica (see `reconcile`). */
  readonly onSuperseded?: () => void;
}

/**
 * This replica's part of the cluster: the runtimes whose tunnels it holds,
 * each mirrored from its `/watch` stream. A runtime leaves the part, with
 * everything on it, the moment its tunnel closes.
 */
export class LocalPart {
  readonly #entries = new Map<string, Entry>();
  readonly #redials: RedialWaits;
  readonly #options: LocalPartOptions;
  #closed = false;

  constructor(options: LocalPartOptions) {
    this.#options = options;
    this.#redials = new RedialWaits(options.clock, options.logger, options.onRedialWaitEnded);
  }

  /** Starts mirroring a newly accepted tunnel (replacing an older one of the same runtime). */
  attach(tunnel: Tunnel): void {
    if (this.#closed) return;
    this.#drop(tunnel.runtimeId);
    const { logger, clock, onChange } = this.#options;
    const limits = { ...RUNTIME_STATE_DEFAULTS, ...this.#options.mirror };
    const mirror = new RuntimeMirror({
      ...limits,
      // Called only once the mirror took a snapshot (the watcher delivers one before any ops, and one
      // after a refusal): one it refused, past the limits, leaves the runtime's state unknown, so unschedulable.
      onChange: () => {
        if (entry.overLimits) {
          logger.info(
            { runtime: tunnel.runtimeId },
            'runtime state back within the limits: new sandboxes go there again',
          );
        }
        entry.synced = true;
        entry.overLimits = false;
        entry.changes++;
        onChange();
      },
    });
    const entry: Entry = {
      tunnel,
      mirror,
      synced: false,
      overLimits: false,
      changes: 0,
      cached: undefined,
      watcher: watchRuntime({
        url: 'http://runtime/watch',
        fetch: tunnel.fetch,
        clock,
        reconnectMs: this.#options.watchReconnectMs ?? 500,
        // Gathering a snapshot in parts stops at what the mirror would take.
        ...limits,
        onSnapshot: (snapshot: WatchSnapshot) => mirror.applySnapshot(snapshot),
        onOps: (ops) => mirror.applyOps(ops),
        onError: (error) => {
          const fields = { runtime: tunnel.runtimeId, err: error.message };
          // A runtime that sends more than any valid event takes is broken or hostile: the operator must hear.
          if (error.code === 'body_too_large') logger.warn(fields, 'runtime state event too large');
          else if (error.code === 'capacity_exhausted') this.#overLimits(entry, { ...fields, ...limits });
          else logger.debug(fields, 'watch interrupted');
        },
      }),
    };
    this.#entries.set(tunnel.runtimeId, entry);
    // While its runtime flaps the endpoint holds back the tunnel's own lines; these follow them to debug.
    logger[tunnel.quiet ? 'debug' : 'info'](
      { runtime: tunnel.runtimeId, generation: tunnel.generation },
      'runtime joined',
    );
    this.#redials.end(tunnel.runtimeId, 'back');
    onChange();
  }

  /** Drops a runtime whose tunnel closed; ignores a stale close of a replaced tunnel. */
  detach(tunnel: Tunnel, reason: string): void {
    const entry = this.#entries.get(tunnel.runtimeId);
    if (entry?.tunnel !== tunnel) return;
    this.#drop(tunnel.runtimeId);
    this.#options.logger[tunnel.quiet ? 'debug' : 'info']({ runtime: tunnel.runtimeId, reason }, 'runtime left');
    if (tunnel.lost && !this.#closed) this.#redials.start(tunnel);
    this.#options.onChange();
  }

  tunnel(runtimeId: string): Tunnel | undefined {
    const entry = this.#entries.get(runtimeId);
    return entry && !entry.tunnel.closed ? entry.tunnel : undefined;
  }

  /**
   * Runs `proceed` now, or, while a runtime whose tunnel was lost here may
   * still redial (see `RedialWaits`), once it is back or the wait is over: a
   * request then reaches the runtime whose connection broke and came back at
   * once, sessions and all, instead of being refused as for a runtime gone.
   */
  afterRedial(runtimeId: string, proceed: () => void): void {
    this.#redials.after(runtimeId, proceed);
  }

  /**
   * Brings the part in line with a committed epoch that shows one of its
   * runtimes behind another replica (`where` looks a runtime up in it): the
   * runtime dialled there (on a connection newer than the one here).
   * Requests waiting here for it go on at once (to be forwarded). A tunnel
   * still held here for it is closed if the runtime's pings stopped coming
   * on it: its connection went silent, the runtime found out first and left,
   * and what is sent into it goes nowhere. (A tunnel whose runtime still
   * pings stays: that is another runtime with the same id, or clocks of
   * replicas apart, and the epoch's choice between the two stands as it was.)
   */
  reconcile(where: (runtimeId: string) => Runtime | undefined): void {
    const newerElsewhere = (runtimeId: string, generation: number): Runtime | undefined => {
      const runtime = where(runtimeId);
      return runtime && runtime.owner !== this.#options.replicaId && runtime.generation > generation
        ? runtime
        : undefined;
    };
    for (const [runtimeId, generation] of [...this.#redials.pending()]) {
      if (newerElsewhere(runtimeId, generation)) this.#redials.end(runtimeId, 'moved');
    }
    for (const { tunnel } of [...this.#entries.values()]) {
      // A tunnel already closed (its close is reported to `detach` a microtask later) is not superseded again.
      if (tunnel.closed) continue;
      const newer = newerElsewhere(tunnel.runtimeId, tunnel.generation);
      if (!newer || !tunnel.peerQuiet) continue;
      this.#options.logger.warn(
        { runtime: tunnel.runtimeId, owner: newer.owner },
        'tunnel superseded: the runtime dialled another replica',
      );
      tunnel.close(`superseded by a newer connection to ${newer.owner}`);
      this.#options.onSuperseded?.();
    }
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Runtimes held here whose state is past the limits: no new sandbox goes to them until they report less. */
  get runtimesOverStateLimit(): number {
    let over = 0;
    for (const entry of this.#entries.values()) if (entry.overLimits) over++;
    return over;
  }

  /** Streams open on the busiest tunnel held here (0 with none). */
  busiestTunnelStreams(): number {
    let most = 0;
    for (const { tunnel } of this.#entries.values()) most = Math.max(most, tunnel.streams);
    return most;
  }

  /** The part in wire form, for epoch collection. */
  states(): RuntimeState[] {
    const out: RuntimeState[] = [];
    for (const entry of this.#entries.values()) {
      const { changes, cached } = entry;
      const closed = entry.tunnel.closed;
      if (cached?.changes !== changes || cached.closed !== closed) {
        entry.cached = { changes, closed, state: this.#stateOf(entry) };
      }
      out.push(entry.cached!.state);
    }
    return out;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const id of [...this.#entries.keys()]) this.#drop(id);
    this.#redials.close();
  }

  /**
   * A runtime reporting more than this replica takes (broken, or a stolen join token) takes no new sandbox for
   * as long as it does: its mirrored state stops at the op refused, so placing by it would be placing blind.
   */
  #overLimits(entry: Entry, fields: object): void {
    // Asked again every 30 s, a runtime that stays over is refused each time: the operator hears of it once (and
    // once when it is back), and sees it meanwhile in runtimesOverStateLimit.
    if (entry.overLimits) return this.#options.logger.debug(fields, 'runtime state still over the limits');
    entry.overLimits = true;
    entry.changes++;
    this.#options.logger.error(
      fields,
      'runtime state over the limits: no new sandbox goes there until it reports less (asked again every 30 s; a line says when it is back); raise runtimeState.processesMax or runtimeState.threadsMax on every replica if it is meant to hold that much',
    );
    this.#options.onChange();
  }

  #drop(runtimeId: string): void {
    const entry = this.#entries.get(runtimeId);
    if (!entry) return;
    this.#entries.delete(runtimeId);
    entry.watcher.close();
  }

  #stateOf(entry: Entry): RuntimeState {
    const { info, generation } = entry.tunnel;
    const state = entry.mirror.state();
    const runtime: Runtime = {
      id: info.id,
      classes: [...info.classes].sort(),
      // Once synced, the streamed metadata is the whole truth (a PUT /metadata replaces it all):
      // merged with what the runtime dialled with, keys it dropped would stay, and the two
      // together could pass the 64 entries every replica allows, failing the part's collect.
      metadata: entry.synced ? state.metadata : { ...info.metadata },
      version: info.version,
      // Before its first snapshot it is unavailable anyway, and shows what it dialled with.
      idleWeight: !entry.synced
        ? { ...info.limits }
        : entry.overLimits
          ? noIdleWeight(state.idleWeight)
          : state.idleWeight,
      available: entry.synced && !entry.tunnel.closed,
      owner: this.#options.replicaId,
      ownerUrl: this.#options.replicaUrl,
      generation,
      ...(info.address !== undefined ? { address: info.address } : {}),
      // Which join token the tunnel came with, so that other replicas refuse the id to another one.
      ...(entry.tunnel.tokenFingerprint !== undefined ? { tokenFingerprint: entry.tunnel.tokenFingerprint } : {}),
      // Which runtime process holds the tunnel, so that other replicas refuse the id to another one.
      ...(entry.tunnel.instance !== undefined ? { instance: entry.tunnel.instance } : {}),
    };
    return { runtime, processes: state.processes, threads: state.threads };
  }
}

/** Every dimension of `weight` at 0, as a full runtime reports it: with none, one (as the reference store does). */
function noIdleWeight(weight: Readonly<Record<string, number>>): Record<string, number> {
  const keys = Object.keys(weight);
  return Object.fromEntries((keys.length > 0 ? keys : ['sandboxes']).map((key) => [key, 0]));
}
