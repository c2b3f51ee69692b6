import type { McpServer } from '@modelcontextprotocol/server';
import type { SessionTransport } from './session-transport.ts';
import type { Clock, Timer } from '@switchyard/clock';
import type { Sandbox } from './registry.ts';

/** One legacy (2025-era) MCP session, bound to one sandbox. */
export interface Session {
  readonly id: string;
  readonly sandbox: Sandbox;
  readonly server: McpServer;
  readonly transport: SessionTransport;
  readonly detach: () => void;
  /**
   * The principal that opened it (`X-Switchyard-Principal`, set by gateways
   * only), undefined without authentication. Only that principal reaches it.
   */
  readonly principal: string | undefined;
  /** Requests (including open GET streams) not yet finished. */
  inflight: number;
  idle: Timer | undefined;
  closed: boolean;
}

export interface SessionTableOptions {
  readonly sessionsMax: number;
  readonly idleMs: number;
  readonly clock: Clock;
  /** Frees what a session holds; called once per session. */
  readonly onClosed: (session: Session, reason: string) => void;
}

/**
 * Open legacy sessions by id, bounded by `sessionsMax`. A session with no
 * request in flight for `idleMs` is closed; an open GET stream counts as in
 * flight, so a listening client is not reaped. Ids being opened are held
 * (`reserve`): they count as taken and toward `sessionsMax`.
 */
export class SessionTable {
  readonly #opts: SessionTableOptions;
  readonly #sessions = new Map<string, Session>();
  /** Ids whose sessions are being opened (their sandboxes starting). */
  readonly #opening = new Set<string>();

  constructor(opts: SessionTableOptions) {
    this.#opts = opts;
  }

  get size(): number {
    return this.#sessions.size;
  }

  get full(): boolean {
    return this.#sessions.size + this.#opening.size >= this.#opts.sessionsMax;
  }

  /** True for an open session's id and for one being opened. */
  has(id: string): boolean {
    return this.#sessions.has(id) || this.#opening.has(id);
  }

  /**
   * Holds `id` while its session is opened: its sandbox may take seconds to
   * start, and an `initialize` adopting the same id meanwhile must find it
   * taken, not replace the first session and leave that one's sandbox held
   * for ever. The returned function lets go; call it once the session is
   * added or its opening failed.
   */
  reserve(id: string): () => void {
    this.#opening.add(id);
    return () => void this.#opening.delete(id);
  }

  get(id: string): Session | undefined {
    return this.#sessions.get(id);
  }

  add(session: Session): void {
    this.#sessions.set(session.id, session);
    this.#armIdle(session);
  }

  /** Marks a request started on `session`; the returned function marks it finished. */
  begin(session: Session): () => void {
    session.inflight++;
    session.idle?.cancel();
    session.idle = undefined;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      session.inflight--;
      if (session.inflight === 0 && !session.closed) this.#armIdle(session);
    };
  }

  close(id: string, reason: string): void {
    const session = this.#sessions.get(id);
    if (!session || session.closed) return;
    session.closed = true;
    session.idle?.cancel();
    this.#sessions.delete(id);
    this.#opts.onClosed(session, reason);
  }

  /** Closes every session bound to `sandboxId` (it went away). */
  closeForSandbox(sandboxId: string, reason: string): void {
    for (const s of [...this.#sessions.values()]) if (s.sandbox.id === sandboxId) this.close(s.id, reason);
  }

  closeAll(reason: string): void {
    for (const id of [...this.#sessions.keys()]) this.close(id, reason);
  }

  #armIdle(session: Session): void {
    session.idle?.cancel();
    session.idle = this.#opts.clock.setTimeout(() => this.close(session.id, 'idle'), this.#opts.idleMs);
  }
}
