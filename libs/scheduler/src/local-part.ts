import type { Clock, Timer } from '@switchyard/clock';
import type { Runtime, RuntimeState, WatchSnapshot } from '@switchyard/protocol';
import { RuntimeMirror, watchRuntime, type RuntimeWatcher } from '@switchyard/agent';
import { BACKOFF_DEFAULTS, type Tunnel } from '@switchyard/tunnel';
import type { ReplicaLogger } from './options.ts';

interface Entry {
  readonly tunnel: Tunnel;
  readonly mirror: RuntimeMirror;
  readonly watcher: RuntimeWatcher;
  /** False until the first `/watch` snapshot arrived: the runtime is not schedulable before. */
  synced: boolean;
  /** Counts mirror changes, so `state` is rebuilt only when something changed. */
  changes: number;
  /**
   * The last state handed out. Epoch sync merges and diffs by object
   * identity first, so an unchanged runtime must keep its object.
   */
  cached: { readonly changes: number; readonly closed: boolean; readonly state: RuntimeState } | undefined;
}

/**
 * How long a request for a runtime whose tunnel was lost here (the
 * connection broke) waits for it to come back, rather than be refused as
 * for a runtime gone; see `LocalPart.afterRedial`. A runtime that lives
 * redials at once, 200-250 ms into its backoff, and a redial to another
 * replica shows in an epoch about 0.1 s later; a session of a runtime that
 * died must still hear so (404) well within a second of its tunnel closing.
 * A tunnel that went silent, or ran over a slow link, is waited for longer
 * (see `#markLost`).
 */
export const REDIAL_WAIT_MS = 600;

/**
 * Round trips from a runtime's redial until the replica holds its new
 * tunnel, with one to spare: TCP's handshake, TLS 1.3's, and the upgrade
 * request (the replica takes the tunnel as it answers it).
 */
const REDIAL_ROUND_TRIPS = 4;

/** A tunnel's round trip is counted up to this. */
const REDIAL_RTT_COUNTED_MAX_MS = 1000;

/**
 * The wait for a runtime whose connection broke: REDIAL_WAIT_MS, or over a
 * link slow enough that the redial's round trips outlast what that leaves
 * after the runtime's first backoff delay (about 90 ms each), as long as
 * those take at the tunnel's least ping round trip (the link's own delay:
 * a busy replica's pings may each have waited for it).
 */
function redialWaitMs(rttMs: number | undefined): number {
  const rtt = Math.min(rttMs ?? 0, REDIAL_RTT_COUNTED_MAX_MS);
  return Math.max(REDIAL_WAIT_MS, BACKOFF_DEFAULTS.initialMs + REDIAL_ROUND_TRIPS * rtt);
}

/** A runtime whose tunnel was lost here lately, and the requests waiting for it. */
interface Lost {
  readonly waiters: Set<() => void>;
  readonly timer: Timer;
  /** The lost tunnel's: a connection of the runtime that an epoch shows elsewhere is its new one if newer. */
  readonly generation: number;
}

/** How the wait for a lost runtime ended: back here, shown behind another replica, or over without it. */
export type RedialOutcome = 'back' | 'moved' | 'gone';

export interface LocalPartOptions {
  readonly replicaId: string;
  readonly replicaUrl: string;
  readonly clock: Clock;
  readonly logger: ReplicaLogger;
  /** Called after any change of the part (a runtime joined or left, or its state changed). */
  readonly onChange: () => void;
  readonly watchReconnectMs?: number;
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
  readonly #lost = new Map<string, Lost>();
  readonly #options: LocalPartOptions;
  #closed = false;

  constructor(options: LocalPartOptions) {
    this.#options = options;
  }

  /** Starts mirroring a newly accepted tunnel (replacing an older one of the same runtime). */
  attach(tunnel: Tunnel): void {
    if (this.#closed) return;
    this.#drop(tunnel.runtimeId);
    const { logger, clock, onChange } = this.#options;
    const mirror = new RuntimeMirror({
      onChange: () => {
        entry.changes++;
        onChange();
      },
    });
    const entry: Entry = {
      tunnel,
      mirror,
      synced: false,
      changes: 0,
      cached: undefined,
      watcher: watchRuntime({
        url: 'http://runtime/watch',
        fetch: tunnel.fetch,
        clock,
        reconnectMs: this.#options.watchReconnectMs ?? 500,
        onSnapshot: (snapshot: WatchSnapshot) => {
          entry.synced = true;
          mirror.applySnapshot(snapshot);
        },
        onOps: (ops) => mirror.applyOps(ops),
        onError: (error) => logger.debug({ runtime: tunnel.runtimeId, err: error.message }, 'watch interrupted'),
      }),
    };
    this.#entries.set(tunnel.runtimeId, entry);
    logger.info({ runtime: tunnel.runtimeId, generation: tunnel.generation }, 'runtime joined');
    this.#found(tunnel.runtimeId, 'back');
    onChange();
  }

  /** Drops a runtime whose tunnel closed; ignores a stale close of a replaced tunnel. */
  detach(tunnel: Tunnel, reason: string): void {
    const entry = this.#entries.get(tunnel.runtimeId);
    if (entry?.tunnel !== tunnel) return;
    this.#drop(tunnel.runtimeId);
    this.#options.logger.info({ runtime: tunnel.runtimeId, reason }, 'runtime left');
    if (tunnel.lost && !this.#closed) this.#markLost(tunnel);
    this.#options.onChange();
  }

  tunnel(runtimeId: string): Tunnel | undefined {
    const entry = this.#entries.get(runtimeId);
    return entry && !entry.tunnel.closed ? entry.tunnel : undefined;
  }

  /**
   * Runs `proceed` now, or, while a runtime whose tunnel was lost here may
   * still redial (REDIAL_WAIT_MS), once it is back or the wait is over: a
   * request then reaches the runtime whose connection broke and came back at
   * once, sessions and all, instead of being refused as for a runtime gone.
   */
  afterRedial(runtimeId: string, proceed: () => void): void {
    const lost = this.#lost.get(runtimeId);
    if (lost) lost.waiters.add(proceed);
    else proceed();
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
    for (const [runtimeId, lost] of [...this.#lost]) {
      if (newerElsewhere(runtimeId, lost.generation)) this.#found(runtimeId, 'moved');
    }
    for (const { tunnel } of [...this.#entries.values()]) {
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
    for (const id of [...this.#lost.keys()]) this.#found(id);
  }

  /**
   * Waits for the runtime to come back (`redialWaitMs`), counted from when
   * it knows to: at once for a connection that broke (both ends see that),
   * but for one that went silent only once the runtime's own pings have
   * found it dead too, which its announced timing bounds
   * (`Tunnel.peerNoticesBy`).
   */
  #markLost(tunnel: Tunnel): void {
    const { runtimeId, peerNoticesBy, generation } = tunnel;
    this.#found(runtimeId);
    const now = this.#options.clock.now();
    const waitMs = Math.max(0, (peerNoticesBy ?? now) - now) + redialWaitMs(tunnel.minRttMs);
    const timer = this.#options.clock.setTimeout(() => this.#found(runtimeId, 'gone'), waitMs);
    this.#lost.set(runtimeId, { waiters: new Set(), timer, generation });
  }

  /** The wait for a lost runtime is over (it is back, or the time is up): its waiters look again. */
  #found(runtimeId: string, outcome?: RedialOutcome): void {
    const lost = this.#lost.get(runtimeId);
    if (!lost) return;
    this.#lost.delete(runtimeId);
    lost.timer.cancel();
    if (outcome) this.#options.onRedialWaitEnded?.(outcome);
    for (const resolve of lost.waiters) resolve();
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
      metadata: { ...info.metadata, ...state.metadata },
      version: info.version,
      idleWeight: entry.synced ? state.idleWeight : { ...info.limits },
      available: entry.synced && !entry.tunnel.closed,
      owner: this.#options.replicaId,
      ownerUrl: this.#options.replicaUrl,
      generation,
      ...(info.address !== undefined ? { address: info.address } : {}),
    };
    return { runtime, processes: state.processes, threads: state.threads };
  }
}
