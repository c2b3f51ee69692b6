import type { SyncMessage } from '@switchyard/protocol';
import type { SyncConnection } from '../types.ts';

export type Side = 'a' | 'b';

/** One logged delivery attempt on a memory link. */
export interface LinkEvent {
  readonly from: Side;
  readonly msg: SyncMessage;
  readonly fate: 'delivered' | 'dropped';
}

const LOG_MAX = 10_000;

export class MemoryConnection implements SyncConnection {
  readonly #link: MemoryLink;
  readonly #side: Side;
  #handler: ((msg: SyncMessage) => void) | undefined;
  #closeHandler: ((code: number, reason: string) => void) | undefined;
  #closed: { code: number; reason: string } | undefined;
  bufferedBytes = 0;
  bufferedBytesMax = 8 * 1024 * 1024;
  /** Off unless a test sets it: the peer is taken for a leader that does not read `error.latestEpoch`. */
  peerReadsLatestEpoch = false;

  constructor(link: MemoryLink, side: Side) {
    this.#link = link;
    this.#side = side;
  }

  get closed(): { code: number; reason: string } | undefined {
    return this.#closed;
  }

  send(msg: SyncMessage): boolean {
    if (this.#closed || this.bufferedBytes > this.bufferedBytesMax) return false;
    this.#link.transmit(this.#side, structuredClone(msg));
    return true;
  }

  onMessage(cb: (msg: SyncMessage) => void): void {
    this.#handler = cb;
  }

  onClose(cb: (code: number, reason: string) => void): void {
    this.#closeHandler = cb;
  }

  close(code: number, reason: string): void {
    this.#link.closeBoth(code, reason);
  }

  deliver(msg: SyncMessage): void {
    if (!this.#closed) this.#handler?.(msg);
  }

  shut(code: number, reason: string): void {
    if (this.#closed) return;
    this.#closed = { code, reason };
    queueMicrotask(() => this.#closeHandler?.(code, reason));
  }
}

/**
 * An in-memory SyncConnection pair for state-machine tests. Delivery is
 * asynchronous (one microtask), in order, and each side can be held (queued
 * until released) or filtered (`drop`) to lose messages. Every attempt is
 * logged (the last 10,000) for transcript assertions.
 */
export class MemoryLink {
  readonly a: MemoryConnection;
  readonly b: MemoryConnection;
  /** Return true to lose a message sent by `from`. */
  drop: ((msg: SyncMessage, from: Side) => boolean) | undefined;
  readonly log: LinkEvent[] = [];
  readonly #held: Record<Side, SyncMessage[] | undefined> = { a: undefined, b: undefined };

  constructor() {
    this.a = new MemoryConnection(this, 'a');
    this.b = new MemoryConnection(this, 'b');
  }

  /** Queues what `from` sends until `release(from)`. */
  hold(from: Side): void {
    this.#held[from] ??= [];
  }

  release(from: Side): void {
    const queue = this.#held[from] ?? [];
    this.#held[from] = undefined;
    for (const msg of queue) this.#schedule(from, msg);
  }

  transmit(from: Side, msg: SyncMessage): void {
    const dropped = this.drop?.(msg, from) ?? false;
    this.log.push({ from, msg, fate: dropped ? 'dropped' : 'delivered' });
    if (this.log.length > LOG_MAX) this.log.shift();
    if (dropped) return;
    const held = this.#held[from];
    if (held) held.push(msg);
    else this.#schedule(from, msg);
  }

  closeBoth(code: number, reason: string): void {
    this.a.shut(code, reason);
    this.b.shut(code, reason);
  }

  /** Messages `from` sent, in order, with their types only; handy for transcripts. */
  types(from: Side): string[] {
    return this.log.filter((e) => e.from === from && e.fate === 'delivered').map((e) => e.msg.type);
  }

  #schedule(from: Side, msg: SyncMessage): void {
    const to = from === 'a' ? this.b : this.a;
    queueMicrotask(() => to.deliver(msg));
  }
}
