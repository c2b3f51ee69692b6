import type { Clock, Timer } from '@switchyard/clock';
import type { TunnelEvent } from '@switchyard/runtime';
import { idHeldByLiveRuntime, schedulerReason, type HeldId } from './join-refusals.ts';
import type { JoinUrls } from './join-urls.ts';
import { lineOf, type LogEntry } from './log-lines.ts';

const UNREACHABLE = 'scheduler unreachable; dialling again';
const REFUSED = 'scheduler refused the tunnel';
/**
 * The refusal the runtime does not follow with its `scheduler unreachable` line (an id another join token
 * holds): shown as the runtime logs it, with its hint, by that line's rule. The others that may pass are
 * said with that line.
 */
const REFUSED_UNFOLLOWED = 409;
/** What ends the line for an id another runtime that runs holds: no scheduler URL to check, another id. */
const PICK_ANOTHER_ID = 'pick another --id';
/** The runtime's lines for its tunnel, which before the join would tell of a tunnel no scheduler used. */
const TUNNEL_LINES = new Set(['tunnel connected', 'tunnel disconnected']);
/**
 * A failure that repeats at each redial is said at the first and then every tenth, as the runtime says a
 * scheduler it cannot reach.
 */
const SAID_EVERY = 10;

/** A failed dial's reason, with what it most often means to whoever typed the URL. */
export function dialFailure(reason: unknown): string {
  const text = typeof reason === 'string' ? reason : 'no reason given';
  // OpenSSL's own text names its source file and line: of no use at a terminal.
  if (/wrong version number/.test(text))
    return 'TLS handshake failed: the server there answers plain HTTP (use http://)';
  if (/ECONNREFUSED/.test(text)) return `${text} (nothing listens there)`;
  if (/ENOTFOUND/.test(text)) return `${text} (no such host)`;
  return text;
}

/**
 * How long `runtime join` dials a scheduler it has not reached yet. A wrong
 * URL, a firewall or a scheduler that is down would otherwise be dialled for
 * ever, most of the time in silence (the runtime logs every tenth failed
 * dial): each failure before the join is said with the time left, and
 * the command ends once `waitMs` has passed with no dial in flight. A dial
 * still in flight then is waited for, since it may yet succeed: it ends
 * within the runtime's connect timeout (a tunnel that came up, within its
 * ping timeout, unless a scheduler uses it), and its failure ends the wait.
 * The join is a scheduler opening the runtime's `/watch` through a tunnel,
 * not the tunnel coming up: a proxy may take the upgrade and drop it, so
 * before the join a tunnel coming up is not said, and one dropped is said
 * as the failed dial it is. Once joined, a scheduler that went away is
 * dialled again until Ctrl-C, as any runtime does, and the tunnel's coming
 * and going is said as the runtime logs it.
 */
export class FirstJoinWait {
  readonly #urls: JoinUrls;
  readonly #waitMs: number;
  readonly #clock: Clock;
  readonly #deadline: number;
  readonly #timer: Timer;
  #joined = false;
  #ended = false;
  #inFlight = false;
  /** What the log said of the dial in flight (the runtime logs only some of them), once it said it. */
  #dialFailure: string | undefined;
  /** The URL given that the dial in flight went to, once the log named it. */
  #dialUrl: string | undefined;
  /** What answered the dial in flight, if it answered and refused it (`answered HTTP 503 (…)`). */
  #dialAnswer: string | undefined;
  /** The last dial's failure, as the line that ends the command gives it, with its URL where known. */
  #failure: string | undefined;
  #failureUrl: string | undefined;
  /** 409s in a row since the last tunnel came up. */
  #idHeldRefusals = 0;
  /** Tunnels dropped before the join. */
  #drops = 0;
  readonly #say: (line: string) => void;
  readonly #giveUp: (line: string) => void;

  /**
   * `say` is called with a line for a dial that failed in a way no log entry tells (a tunnel dropped before
   * the join); `giveUp` once with the line that ends the command, if it comes to that.
   */
  constructor(
    urls: JoinUrls,
    waitMs: number,
    clock: Clock,
    say: (line: string) => void,
    giveUp: (line: string) => void,
  ) {
    this.#urls = urls;
    this.#waitMs = waitMs;
    this.#clock = clock;
    this.#deadline = clock.monotonicNow() + waitMs;
    this.#say = say;
    this.#giveUp = giveUp;
    this.#timer = clock.setTimeout(() => {
      if (!this.#inFlight && this.#failure !== undefined) this.#end();
    }, waitMs);
  }

  close(): void {
    this.#timer.cancel();
  }

  /**
   * Follows the runtime's dials: the one in flight (a tunnel up counts, until
   * a scheduler watches it or it drops) is waited for; the failure of one
   * past the wait ends it; a scheduler opening the runtime's `/watch` is the
   * join, after which nothing ends it.
   */
  onTunnel(event: TunnelEvent): void {
    if (event.type === 'dialling') this.#dialAnswer = undefined;
    if (event.type === 'up') this.#idHeldRefusals = 0;
    if (this.#joined || this.#ended) return;
    switch (event.type) {
      case 'dialling':
        this.#inFlight = true;
        this.#dialFailure = undefined;
        this.#dialUrl = undefined;
        return;
      case 'watched':
        this.#joined = true;
        return this.close();
      case 'failed':
        return this.#dialEnded(this.#dialFailure ?? dialFailure(event.reason));
      case 'down':
        return this.#dropped(event.reason);
    }
  }

  /**
   * Whatever answered took the upgrade, but no scheduler used the tunnel (a proxy that passes it nowhere):
   * a failed dial, said as one by the rule for repeated failures.
   */
  #dropped(reason: string): void {
    const failure = `the tunnel was dropped before a scheduler used it (${reason})`;
    // Past the wait, the line that gives up says it.
    if (this.#drops++ % SAID_EVERY === 0 && !this.#overdue()) {
      this.#say(
        `${this.#urls.label} took the tunnel and dropped it before a scheduler used it (${reason}); ${this.#again()}`,
      );
    }
    this.#dialEnded(failure);
  }

  /** A dial ended with no join: the wait, if over, ends with its failure. */
  #dialEnded(failure: string): void {
    this.#inFlight = false;
    this.#failure = failure;
    this.#failureUrl = this.#dialUrl;
    if (this.#overdue()) this.#end();
  }

  /**
   * The line to show for a log entry about a failed dial, '' for one of
   * those that shows nothing (a refusal that may pass is said with the
   * runtime's `scheduler unreachable` line after it, which comes at the
   * first failed dial and every tenth; a 409 by the same rule; before the
   * join, the tunnel's own lines), or undefined for any other entry.
   */
  lineFor(entry: LogEntry): string | undefined {
    if (entry.msg === UNREACHABLE) {
      // A dial whose refusal may pass is logged as unreachable too, by the same rule: said as what answered.
      const failure = this.#dialAnswer ?? dialFailure(entry.reason);
      const url = this.#urls.given(entry.url);
      const what = this.#dialAnswer ? `${url} ${failure}` : `cannot reach ${url}: ${failure}`;
      if (this.#joined) return `${what}; dialling again (Ctrl-C to stop)`;
      this.#dialFailure = failure;
      this.#dialUrl = url;
      // The command ends as the runtime tells that this dial ended; no time is left to announce.
      if (this.#overdue()) return '';
      return `${what}; ${this.#again()}`;
    }
    // Before the join a tunnel that came up is no news, and one dropped is said as a failed dial (#dropped).
    if (TUNNEL_LINES.has(entry.msg ?? '')) return this.#joined ? undefined : '';
    if (!entry.msg?.startsWith(REFUSED) || entry.status === undefined) return undefined;
    const held = idHeldByLiveRuntime(entry);
    if (held !== undefined) return this.#heldByLiveRuntime(held, this.#urls.given(entry.url));
    if (entry.status === REFUSED_UNFOLLOWED) {
      if (!this.#joined) this.#dialFailure = lineOf(entry);
      return this.#idHeldRefusals++ % SAID_EVERY === 0 ? lineOf(entry) : '';
    }
    // A refusal that may pass (a proxy's 502, a scheduler at its maxRuntimes): dialled again, within the wait.
    const reason = schedulerReason(entry.body);
    this.#dialAnswer = `answered HTTP ${entry.status}${reason === undefined ? '' : ` (${reason})`}`;
    if (!this.#joined) this.#dialFailure = this.#dialAnswer;
    return '';
  }

  /**
   * A runtime that runs holds the id: said at the first refusal and every tenth, and dialled on (within
   * the wait, before the join): this runtime's own earlier run, whose connection broke, holds it only
   * until the replica finds its pings overdue, which the line says when the scheduler tells. The line
   * that gives up does not: at the default wait, longer than that, the holder pinged all along it.
   */
  #heldByLiveRuntime({ id, droppedIfSilentInMs }: HeldId, url: string): string {
    const held = `the id ${id} is held by another live runtime`;
    if (!this.#joined) this.#dialFailure = `${held}; ${PICK_ANOTHER_ID}`;
    if (this.#idHeldRefusals++ % SAID_EVERY !== 0 || (!this.#joined && this.#overdue())) return '';
    const gone =
      droppedIfSilentInMs === undefined
        ? ''
        : ` (if that runtime is gone, its tunnel is dropped within ${Math.ceil(droppedIfSilentInMs / 1000)} s)`;
    const again = this.#joined ? 'dialling again (Ctrl-C to stop)' : this.#again();
    return `${url} refused the tunnel: ${held}${gone}; ${PICK_ANOTHER_ID}; ${again}`;
  }

  /** How long the command dials on, for a line about a failed dial before the join. */
  #again(): string {
    const leftS = Math.ceil((this.#deadline - this.#clock.monotonicNow()) / 1000);
    return `dialling again for up to ${leftS} s (--wait-seconds)`;
  }

  #overdue(): boolean {
    return this.#clock.monotonicNow() >= this.#deadline;
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.close();
    // Given more than one URL, the line names the one that failed last, where the log said which.
    const at = this.#urls.all.length > 1 && this.#failureUrl !== undefined ? `${this.#failureUrl}: ` : '';
    // An id held elsewhere is no URL to check, and waiting longer would not help.
    const advice = this.#failure?.endsWith(PICK_ANOTHER_ID)
      ? ''
      : '; check <scheduler-url>, or wait longer with --wait-seconds';
    this.#giveUp(`gave up dialling ${this.#urls.label} after ${this.#waitMs / 1000} s: ${at}${this.#failure}${advice}`);
  }
}
