import type { Clock, Timer } from '@switchyard/clock';
import type { LogEntry } from './log-lines.ts';
import { lineOf } from './log-lines.ts';

const UNREACHABLE = 'scheduler unreachable; dialling again';
const REFUSED = 'scheduler refused the tunnel';

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
 * dial): each failure before the first tunnel is said with the time left,
 * and the first one after `waitMs` ends the command. Once a tunnel was up, a
 * scheduler that went away is dialled again until Ctrl-C, as any runtime does.
 */
export class FirstJoinWait {
  readonly #url: string;
  readonly #waitMs: number;
  readonly #clock: Clock;
  readonly #deadline: number;
  readonly #timer: Timer;
  #joined = false;
  #failure: string | undefined;
  #overdue = false;
  readonly #giveUp: (line: string) => void;

  /** `giveUp` is called once with the line that ends the command, if it comes to that. */
  constructor(url: string, waitMs: number, clock: Clock, giveUp: (line: string) => void) {
    this.#url = url;
    this.#waitMs = waitMs;
    this.#clock = clock;
    this.#deadline = clock.monotonicNow() + waitMs;
    this.#giveUp = giveUp;
    this.#timer = clock.setTimeout(() => {
      this.#overdue = true;
      // A dial still in flight ends within the runtime's connect timeout; its failure ends the wait.
      if (this.#failure !== undefined) this.#end();
    }, waitMs);
  }

  joined(): void {
    this.#joined = true;
    this.close();
  }

  close(): void {
    this.#timer.cancel();
  }

  /** The line to show for a log entry about a failed dial, or undefined for any other entry (or none to show). */
  lineFor(entry: LogEntry): string | undefined {
    if (entry.msg === UNREACHABLE) {
      const failure = dialFailure(entry.reason);
      if (this.#joined) return `cannot reach ${this.#url}: ${failure}; dialling again (Ctrl-C to stop)`;
      this.#failure = failure;
      if (this.#overdue || this.#clock.monotonicNow() >= this.#deadline) return void this.#end();
      const leftS = Math.ceil((this.#deadline - this.#clock.monotonicNow()) / 1000);
      return `cannot reach ${this.#url}: ${failure}; dialling again for up to ${leftS} s (--wait-seconds)`;
    }
    if (entry.msg?.startsWith(REFUSED) && !this.#joined) {
      // A refusal that may pass (a proxy's 502, an id still held): dialled again, within the same wait.
      this.#failure = lineOf(entry);
      if (this.#overdue) return void this.#end();
    }
    return undefined;
  }

  #end(): void {
    this.close();
    this.#giveUp(
      `gave up dialling ${this.#url} after ${this.#waitMs / 1000} s: ${this.#failure}; ` +
        'check <scheduler-url>, or wait longer with --wait-seconds',
    );
  }
}
