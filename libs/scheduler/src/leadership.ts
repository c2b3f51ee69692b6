import { Throttle, type Clock } from '@switchyard/clock';
import { LeaderElector, formatHolder, parseHolder, type ElectionTiming, type LeaseLock } from '@switchyard/election';
import {
  CLOSE_POLICY,
  CLOSE_REASON_RUN_TOO_BIG,
  CLOSE_REASON_WITHDRAWN,
  CLOSE_TOO_BIG,
  EpochFollower,
  EpochLeader,
  SYNC_PAYLOAD_BYTES_MAX,
  WS_SYNC_DEFAULTS,
  connectSync,
  createSyncServer,
  type CommitInfo,
  type SnapshotReason,
  type SyncConnection,
  type SyncServer,
} from '@switchyard/epoch';
import type { RuntimeState } from '@switchyard/protocol';
import { applyOps as apply, diffStates, mergeParts } from '@switchyard/scheduling';
import { watchTokenRevocations, type TokenRevocations } from '@switchyard/service';
import { bearerMatches } from '@switchyard/tunnel';
import type { ClusterView } from './cluster-view.ts';
import { FOLLOWERS_LOGGED_MAX, FollowerSnapshots } from './follower-snapshots.ts';
import type { ReplicaLogger } from './options.ts';

export interface LeadershipOptions {
  readonly replicaId: string;
  readonly replicaUrl: string;
  readonly clock: Clock;
  readonly lock: LeaseLock;
  readonly timing?: Partial<ElectionTiming>;
  readonly epoch?: {
    readonly cycleIntervalMs?: number;
    readonly cycleTimeoutMs?: number;
    readonly staleAfterMs?: number;
    readonly forgetAfterMs?: number;
    /** Largest sync frame taken from a peer, and assumed of peers. Default `SYNC_PAYLOAD_BYTES_MAX` (64 MiB). */
    readonly frameBytesMax?: number;
    /** Largest run of parts taken from a peer, its frames together. Default `WS_SYNC_DEFAULTS.runBytesMax`. */
    readonly runBytesMax?: number;
  };
  readonly localPart: () => readonly RuntimeState[];
  /**
   * Tokens a peer must present on `/api/sync/:replica`; a follower presents them in turn, one per attempt, from
   * the one its leader took last. None: no peer is admitted.
   */
  readonly peerTokens: () => readonly string[];
  readonly view: ClusterView;
  readonly logger: ReplicaLogger;
  readonly onLeaderCommit?: (info: CommitInfo) => void;
  /** Leading, this replica sent a follower a snapshot of the latest epoch, for `reason`. */
  readonly onLeaderSnapshot?: (reason: SnapshotReason) => void;
  /** Leading, this replica sent a follower that missed epochs one delta to the latest, in place of a snapshot. */
  readonly onLeaderCatchUp?: () => void;
  readonly onRoleChange?: () => void;
}

/** Reconnect delays of a follower that lost its leader connection, ms. */
const FOLLOW_RETRY_MS = [100, 250, 500, 1000, 2000] as const;
/**
 * A frame or run above the sync limits repeats at every cycle and redial: one line a minute says it, with the
 * count held.
 */
const FRAME_LIMIT_LOG_INTERVAL_MS = 60_000;

/**
 * One replica's role in the cluster. The elector decides; this object turns
 * its decisions into epoch work: while leading (and only until the signal
 * aborts) an EpochLeader runs and accepts followers on `/api/sync/:replica`;
 * otherwise the replica's EpochFollower dials the current holder. The
 * follower lives as long as the replica so its fence (the highest term seen)
 * survives changes of leader.
 */
export class Leadership {
  readonly #options: LeadershipOptions;
  readonly #elector: LeaderElector;
  readonly #follower: EpochFollower;
  readonly #syncServer: SyncServer;
  readonly #peerRevocations: TokenRevocations;
  #leader: EpochLeader | undefined;
  #holder: { id: string; address: string } | undefined;
  /**
   * The leader this replica saw since it last led, if any: the one a new term of ours takes over from, whose
   * runtimes are not carried into that term (it may be dead). Cleared when we lead: a later term of ours,
   * with no other leader seen in between, takes over from us, and every other replica's runtimes are kept.
   */
  #previousLeader: string | undefined;
  #term = 0;
  /**
   * The highest epoch a follower told us it holds when it refused our messages. A term we lead next starts
   * above it: a follower accepts the higher term whatever its epoch numbers, and its view would go back.
   */
  #toldEpoch = 0;
  /**
   * The peer token a leader took last, by value (the list may change meanwhile): a redial presents it first, so
   * a token this replica lists and the leader does not take yet (a rotation under way) costs no attempt.
   */
  #peerTokenTaken: string | undefined;
  #connection: SyncConnection | undefined;
  #followGeneration = 0;
  #stopped = false;
  readonly #frameLimitLog: Throttle;
  /** Followers refused, by cause and follower: a second one is named while the first is still refused. */
  readonly #followerRefusedLog: Throttle;
  readonly #followerSnapshots: FollowerSnapshots;

  constructor(options: LeadershipOptions) {
    this.#options = options;
    const { replicaId, replicaUrl, clock, view, localPart } = options;
    this.#frameLimitLog = new Throttle(clock, FRAME_LIMIT_LOG_INTERVAL_MS);
    this.#followerRefusedLog = new Throttle(clock, FRAME_LIMIT_LOG_INTERVAL_MS, FOLLOWERS_LOGGED_MAX);
    this.#followerSnapshots = new FollowerSnapshots(options.logger, clock, (reason) =>
      options.onLeaderSnapshot?.(reason),
    );
    this.#follower = new EpochFollower({
      replicaId,
      clock,
      localPart,
      diff: diffStates,
      apply,
      sink: view,
      onReject: (info) => options.logger.warn({ ...info }, 'sync message fenced off'),
    });
    // A follower on a peer token that is then removed is closed, and redials presenting the token after it first.
    this.#peerRevocations = watchTokenRevocations({ tokens: options.peerTokens, clock });
    const admits = (authorization: string | undefined): boolean => bearerMatches(authorization, options.peerTokens());
    this.#syncServer = createSyncServer({
      authorize: (req) => admits(req.headers.authorization),
      watch: (req, close) => this.#peerRevocations.hold(() => admits(req.headers.authorization), close),
      ...(options.epoch?.frameBytesMax === undefined ? {} : { payloadBytesMax: options.epoch.frameBytesMax }),
      ...(options.epoch?.runBytesMax === undefined ? {} : { runBytesMax: options.epoch.runBytesMax }),
      onLargeFrame: (replica, bytes, frameBytesMax) => {
        const unlogged = this.#frameLimitLog.pass('sent');
        if (unlogged === undefined) return;
        options.logger.warn(
          { replica, bytes, frameBytesMax, unlogged },
          'sent a sync frame above epoch.frameBytesMax: followers refuse it and cannot follow; raise epoch.frameBytesMax on every replica',
        );
      },
      onRefused: (replica, code, reason) => this.#followerRefused(replica, code, reason),
      onConnection: (conn, replica) => {
        if (this.#leader) this.#leader.attach(conn, replica);
        else conn.close(1013, 'not the leader');
      },
    });
    this.#elector = new LeaderElector({
      lock: options.lock,
      identity: formatHolder({ id: replicaId, address: replicaUrl }),
      clock,
      ...options.timing,
      onStartedLeading: ({ term, signal }) => this.#lead(term, signal),
      onNewLeader: (holder, term) => this.#observe(holder, term),
      logger: options.logger,
    });
  }

  start(): void {
    this.#elector.start();
  }

  get isLeader(): boolean {
    return this.#leader !== undefined;
  }

  get term(): number {
    return this.#term;
  }

  /** The current holder as seen by the elector (this replica included). */
  get leader(): { id: string; url: string } | undefined {
    return this.#holder && { id: this.#holder.id, url: this.#holder.address };
  }

  get syncServer(): SyncServer {
    return this.#syncServer;
  }

  /** The part changed: let the leader (or the follower's next collect) see it promptly. */
  notifyChange(): void {
    this.#leader?.notifyChange();
    this.#follower.notifyChange();
  }

  /** A kept epoch's full state, from whichever role has it; shared with the history: never mutate it. */
  snapshotAt(epoch: number): readonly RuntimeState[] | undefined {
    return this.#leader?.snapshotAt(epoch) ?? this.#follower.snapshotAt(epoch);
  }

  /** Steps down (releasing the lease so a successor takes over within a retry period) and closes sync. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    await this.#elector.stop();
    this.#leader?.stop();
    this.#leader = undefined;
    this.#follower.stop();
    this.#connection?.close(1001, 'replica stopping');
    this.#syncServer.close();
    this.#peerRevocations.close();
  }

  #lead(term: number, signal: AbortSignal): void {
    const { options } = { options: this.#options };
    const {
      frameBytesMax: _frameForTheSyncServer,
      runBytesMax: _runForTheSyncServer,
      ...epochOptions
    } = options.epoch ?? {};
    // Our follower saw this term from another leader (the Lease was deleted and created again below it): leading
    // at it would give followers a second history under one term, which they would take for the first. Lead above.
    if (term <= this.#follower.term) return this.#elector.termExists(this.#follower.term);
    this.#disconnectFollower();
    const leader = new EpochLeader({
      replicaId: options.replicaId,
      term,
      clock: options.clock,
      localPart: options.localPart,
      merge: mergeParts,
      diff: diffStates,
      apply,
      sink: options.view,
      startEpoch: Math.max(options.view.epoch, this.#follower.latest()?.epoch ?? 0, this.#toldEpoch),
      seedParts: partsByOwner(options.view.states(), this.#takeOverFrom()),
      ...epochOptions,
      ...(options.onLeaderCommit ? { onCommit: options.onLeaderCommit } : {}),
      onSnapshotSent: (info) => this.#followerSnapshots.sent(info),
      ...(options.onLeaderCatchUp ? { onCatchUpSent: options.onLeaderCatchUp } : {}),
      onFollowerError: (replica, followerTerm, reason, latestEpoch) => {
        options.logger.warn({ replica, term: followerTerm, latestEpoch, reason }, 'follower reported an error');
        this.#toldEpoch = Math.max(this.#toldEpoch, latestEpoch ?? 0);
        // A follower that saw a higher term fences off every message of ours, for good: the lease was created
        // again below it (deleted, then taken by a replica that never read it). Lead again above that term.
        if (followerTerm > term) this.#elector.termExists(followerTerm);
      },
      onFollowerForgotten: (replica, runtimes) =>
        options.logger.info({ replica, runtimes }, 'forgot a replica detached for long, and the runtimes it held'),
    });
    this.#leader = leader;
    this.#term = term;
    options.logger.info({ term }, 'leading');
    options.onRoleChange?.();
    signal.addEventListener(
      'abort',
      () => {
        leader.stop();
        if (this.#leader === leader) this.#leader = undefined;
        // The view holds this term's last epoch: the follower judges the next leader's commits against it, so
        // a second leader of this term (a lease created again at it) cannot take the view back or mix with it.
        const latest = leader.latest();
        const states = leader.latestStates();
        if (latest && states) this.#follower.adopt(latest, states);
        // stop() ends leadership on purpose (the replica is going away); any other loss is a fault it survives.
        if (this.#stopped) options.logger.info({ term }, 'stopped leading: replica stopping');
        else options.logger.warn({ term }, 'stopped leading; continuing as a follower');
        options.onRoleChange?.();
      },
      { once: true },
    );
  }

  /** The leader a new term of ours takes over from; forgotten, so the next term of ours takes over from us. */
  #takeOverFrom(): string | undefined {
    const previous = this.#previousLeader;
    this.#previousLeader = undefined;
    return previous;
  }

  #observe(holder: string | undefined, term: number): void {
    this.#holder = parseHolder(holder);
    if (this.#holder && this.#holder.id !== this.#options.replicaId) this.#previousLeader = this.#holder.id;
    this.#term = Math.max(this.#term, term);
    this.#options.onRoleChange?.();
    if (!this.#holder || this.#holder.id === this.#options.replicaId) {
      this.#disconnectFollower();
      return;
    }
    void this.#follow(this.#holder.address);
  }

  #disconnectFollower(): void {
    this.#followGeneration++;
    this.#connection?.close(1000, 'leader changed');
    this.#connection = undefined;
  }

  async #follow(leaderUrl: string): Promise<void> {
    this.#disconnectFollower();
    const generation = this.#followGeneration;
    const current = (): boolean => !this.#stopped && generation === this.#followGeneration;
    const frameBytesMax = this.#options.epoch?.frameBytesMax;
    const runBytesMax = this.#options.epoch?.runBytesMax;
    // Failed attempts since the last sync that worked (attempt also counts one that ended in a close).
    let failures = 0;
    // Where the next attempt is in the token order, which starts at the token the leader took last.
    let turn = 0;
    for (let attempt = 0; current(); attempt++) {
      try {
        // Each attempt presents the next token in that order: kubelet updates each pod's mounted Secret on
        // its own schedule, so in a rotation the leader may take only some of the tokens listed here. Any
        // token both still list then gets through within a few attempts, and is presented first from then on.
        const token = peerTokenAt(this.#options.peerTokens(), this.#peerTokenTaken, turn++);
        const conn = await connectSync(leaderUrl, this.#options.replicaId, {
          handshakeTimeoutMs: 2000,
          ...(token ? { headers: { authorization: `Bearer ${token}` } } : {}),
          ...(frameBytesMax === undefined ? {} : { payloadBytesMax: frameBytesMax }),
          ...(runBytesMax === undefined ? {} : { runBytesMax }),
        });
        this.#peerTokenTaken = token;
        if (!current()) {
          conn.close(1000, 'leader changed');
          return;
        }
        const { connection, closed } = observeClose(conn);
        this.#connection = connection;
        this.#follower.attach(connection);
        this.#options.logger.info({ leader: leaderUrl }, 'following');
        failures = 0;
        const { code, reason } = await closed;
        const runTooBig = code === CLOSE_POLICY && reason.startsWith(CLOSE_REASON_RUN_TOO_BIG);
        if (code === CLOSE_TOO_BIG && current()) this.#frameTooBig(leaderUrl, reason);
        else if (runTooBig && current()) this.#runTooBig(leaderUrl, reason);
        // 1008: one side broke the sync protocol (e.g. replicas of versions that do not speak the same one).
        const level = code === CLOSE_POLICY ? 'warn' : 'info';
        if (current() && code !== CLOSE_TOO_BIG && !runTooBig)
          this.#options.logger[level]({ leader: leaderUrl, code, reason }, 'sync connection to the leader closed');
        attempt = 0;
        // The leader no longer takes the token (the last step of a rotation): the next one is likelier to do.
        turn = code === CLOSE_POLICY && reason === CLOSE_REASON_WITHDRAWN ? 1 : 0;
      } catch (error) {
        // Until it reaches the leader, this replica answers from its last epoch: say so at the first failure
        // and every tenth after (a dead leader, until its lease expires; a peer token the leader refuses).
        failures++;
        const level = failures === 1 || failures % 10 === 0 ? 'warn' : 'debug';
        const err = (error as Error).message;
        this.#options.logger[level]({ leader: leaderUrl, err, failures }, 'cannot reach the leader; trying again');
      }
      if (!current()) return;
      const delayMs = FOLLOW_RETRY_MS[Math.min(attempt, FOLLOW_RETRY_MS.length - 1)]!;
      await new Promise<void>((resolve) => this.#options.clock.setTimeout(resolve, delayMs));
    }
  }

  /**
   * A frame above the limit (either way: the leader's commit, or our collect the leader refused) comes again at
   * every redial: this replica keeps its last epoch and answers from it, stale, until the limit is raised.
   */
  #frameTooBig(leaderUrl: string, reason: string): void {
    const unlogged = this.#frameLimitLog.pass('refused');
    if (unlogged === undefined) return;
    const frameBytesMax = this.#options.epoch?.frameBytesMax ?? SYNC_PAYLOAD_BYTES_MAX;
    this.#options.logger.error(
      { leader: leaderUrl, reason, frameBytesMax, unlogged },
      'sync connection to the leader closed on a frame above epoch.frameBytesMax: this replica cannot follow; raise epoch.frameBytesMax on every replica',
    );
  }

  /**
   * This replica, leading, closed a follower's connection on what it sent. The follower redials and sends it
   * again (its full part, above a limit or from a version that does not speak this protocol), and its runtimes
   * stay out of the epochs until it is fixed: one line a minute for each cause and follower, naming the option.
   */
  #followerRefused(replica: string, code: number, reason: string): void {
    const runTooBig = code === CLOSE_POLICY && reason.startsWith(CLOSE_REASON_RUN_TOO_BIG);
    const kind = runTooBig ? 'run' : code === CLOSE_TOO_BIG ? 'frame' : 'message';
    const unlogged = this.#followerRefusedLog.pass(`${kind}\n${replica}`);
    if (unlogged === undefined) return;
    const { logger, epoch } = this.#options;
    if (runTooBig) {
      const runBytesMax = epoch?.runBytesMax ?? WS_SYNC_DEFAULTS.runBytesMax;
      logger.error(
        { replica, reason, runBytesMax, unlogged },
        "closed a follower's sync connection on a run of parts above epoch.runBytesMax: its runtimes stay out of the epochs; raise epoch.runBytesMax on every replica",
      );
    } else if (code === CLOSE_TOO_BIG) {
      const frameBytesMax = epoch?.frameBytesMax ?? SYNC_PAYLOAD_BYTES_MAX;
      logger.error(
        { replica, reason, frameBytesMax, unlogged },
        "closed a follower's sync connection on a frame above epoch.frameBytesMax: its runtimes stay out of the epochs; raise epoch.frameBytesMax on every replica",
      );
    } else {
      // A run out of order or a malformed message: replicas of versions that do not speak the same protocol.
      logger.warn({ replica, code, reason, unlogged }, "refused a follower's sync message and closed its connection");
    }
  }

  /** Like a frame above its limit, a run of parts above `runBytesMax` (either way) comes again at every redial. */
  #runTooBig(leaderUrl: string, reason: string): void {
    const unlogged = this.#frameLimitLog.pass('run refused');
    if (unlogged === undefined) return;
    const runBytesMax = this.#options.epoch?.runBytesMax ?? WS_SYNC_DEFAULTS.runBytesMax;
    this.#options.logger.error(
      { leader: leaderUrl, reason, runBytesMax, unlogged },
      'sync connection to the leader closed on a run of parts above epoch.runBytesMax: this replica cannot follow; raise epoch.runBytesMax on every replica',
    );
  }
}

/**
 * The token to present at `turn` (0 the first attempt): the listed tokens in
 * order, round and round, from `taken` if it is still listed, else from the
 * first. Undefined for an empty list.
 */
function peerTokenAt(tokens: readonly string[], taken: string | undefined, turn: number): string | undefined {
  if (tokens.length === 0) return undefined;
  const start = taken === undefined ? 0 : Math.max(tokens.indexOf(taken), 0);
  return tokens[(start + turn) % tokens.length];
}

/**
 * A connection carries one close handler; the follower takes it. This wrapper
 * lets the reconnect loop learn of the close as well.
 */
function observeClose(conn: SyncConnection): {
  connection: SyncConnection;
  closed: Promise<{ code: number; reason: string }>;
} {
  let handler: ((code: number, reason: string) => void) | undefined;
  let closedWith: { code: number; reason: string } | undefined;
  let resolveClosed!: (how: { code: number; reason: string }) => void;
  const closed = new Promise<{ code: number; reason: string }>((resolve) => (resolveClosed = resolve));
  conn.onClose((code, reason) => {
    closedWith = { code, reason };
    resolveClosed(closedWith);
    handler?.(code, reason);
  });
  const connection: SyncConnection = {
    send: (msg) => conn.send(msg),
    onMessage: (cb) => conn.onMessage(cb),
    onClose: (cb) => {
      handler = cb;
      if (closedWith) queueMicrotask(() => cb(closedWith!.code, closedWith!.reason));
    },
    close: (code, reason) => conn.close(code, reason),
    get bufferedBytes() {
      return conn.bufferedBytes;
    },
    get backlogged() {
      return conn.backlogged;
    },
    ...(conn.peerReadsLatestEpoch === undefined ? {} : { peerReadsLatestEpoch: conn.peerReadsLatestEpoch }),
  };
  return { connection, closed };
}

/**
 * The last epoch's runtimes grouped by the replica holding their tunnels:
 * a new leader starts from them, so followers that have not reconnected yet
 * keep their runtimes (until their part goes stale) instead of dropping out
 * of the first epochs of the term. The previous leader's runtimes are left
 * out: if it died, its tunnels died with it.
 */
function partsByOwner(
  states: readonly RuntimeState[],
  previousLeader: string | undefined,
): Map<string, RuntimeState[]> {
  const parts = new Map<string, RuntimeState[]>();
  for (const state of states) {
    const owner = state.runtime.owner;
    if (owner === previousLeader) continue;
    let part = parts.get(owner);
    if (!part) parts.set(owner, (part = []));
    part.push(state);
  }
  return parts;
}
