import type { Readable } from 'node:stream';
import type { Clock, Timer } from '@switchyard/clock';
import type { Logger } from './types.ts';

/** Longest stderr line logged, characters; the rest of a longer line is dropped as it arrives. */
const STDERR_LINE_MAX = 2048;
/** Lines of one class's children's stderr logged per window; the others are counted. */
const STDERR_LINES_MAX = 100;
const STDERR_WINDOW_MS = 10_000;
/** Last lines kept for the log of the child's death, and how much of each. */
const STDERR_TAIL_LINES = 5;
const STDERR_TAIL_LINE_MAX = 512;

export interface StderrSource {
  readonly className: string;
  readonly pid: number;
}

/** A child's last stderr lines, logged or not. */
export interface StderrTail {
  /** At most STDERR_TAIL_LINES lines of at most STDERR_TAIL_LINE_MAX characters, oldest first. */
  lines(): string[];
}

/**
 * The stderr lines one class's children may log, shared by all of them: a
 * server that dies on every call, or exits before it is ready, is started
 * once per request, and a budget per child would let each start log its
 * own STDERR_LINES_MAX lines. At most STDERR_LINES_MAX lines per
 * STDERR_WINDOW_MS are logged; the others are counted, and the count is
 * logged when a child's stderr ends or a line of a later window comes, but
 * at most once per window (a count held back is logged when the window
 * ends), so a crash loop writes neither a line nor a count per child.
 */
export class StderrBudget {
  readonly #clock: Clock;
  /** Set by the first line after a window ends: a window starts with the lines it limits. */
  #windowStartMs = -Infinity;
  #logged = 0;
  #dropped = 0;
  #reportedAtMs = -Infinity;
  /** Logs the count held back once the window allows; its timer never keeps the process alive. */
  #deferred: { timer: Timer; report: (dropped: number) => void } | undefined;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** True when a line may be logged now; false when it was counted as dropped instead. */
  take(report: (dropped: number) => void): boolean {
    const now = this.#clock.monotonicNow();
    if (now - this.#windowStartMs >= STDERR_WINDOW_MS) {
      this.report(report);
      this.#windowStartMs = now;
      this.#logged = 0;
    }
    if (this.#logged >= STDERR_LINES_MAX) {
      this.#dropped++;
      return false;
    }
    this.#logged++;
    return true;
  }

  /** Hands the lines dropped since the last count to `report`: now, or when this window's count is due. */
  report(report: (dropped: number) => void): void {
    if (this.#dropped === 0) return;
    const waitMs = this.#reportedAtMs + STDERR_WINDOW_MS - this.#clock.monotonicNow();
    if (waitMs > 0) {
      if (this.#deferred) this.#deferred.report = report;
      else this.#deferred = { timer: this.#clock.setTimeout(() => this.#flush(), waitMs), report };
      return;
    }
    this.#deferred?.timer.cancel();
    this.#deferred = undefined;
    this.#reportedAtMs = this.#clock.monotonicNow();
    report(this.#dropped);
    this.#dropped = 0;
  }

  #flush(): void {
    const deferred = this.#deferred;
    this.#deferred = undefined;
    if (deferred) this.report(deferred.report);
  }
}

/**
 * Logs a child's stderr line by line, within its class's StderrBudget. The
 * stream is always read to its end, so a child that logs faster than that
 * never blocks on a full pipe; and no line is held past STDERR_LINE_MAX
 * characters, so a child that writes without newlines cannot grow the
 * runtime's memory. Its last lines, dropped ones included (usually the
 * explanation of a crash), are kept for the log of its death.
 */
export function logStderr(stream: Readable, source: StderrSource, logger: Logger, budget: StderrBudget): StderrTail {
  const tail: string[] = [];
  let partial = '';
  /** The current line outgrew STDERR_LINE_MAX: what is left of it is dropped up to its newline. */
  let cut = false;
  const report = (dropped: number): void =>
    logger.warn(
      {
        event: 'sandbox.stderr_dropped',
        class: source.className,
        pid: source.pid,
        dropped,
        windowMs: STDERR_WINDOW_MS,
      },
      `stderr: ${dropped} lines not logged (more than ${STDERR_LINES_MAX} in ${STDERR_WINDOW_MS / 1000} s)`,
    );
  const line = (raw: string): void => {
    const text = raw.replace(/\r$/, '');
    if (tail.push(text.slice(0, STDERR_TAIL_LINE_MAX)) > STDERR_TAIL_LINES) tail.shift();
    if (!budget.take(report)) return;
    // A stdio MCP server's log goes to stderr (the protocol has stdout):
    // informational as often as not, so no warning.
    logger.info({ event: 'sandbox.stderr', class: source.className, pid: source.pid, line: text }, 'stderr');
  };
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    let start = 0;
    for (let nl = chunk.indexOf('\n'); nl >= 0; nl = chunk.indexOf('\n', start)) {
      if (!cut) line(partial + chunk.slice(start, Math.min(nl, start + STDERR_LINE_MAX - partial.length)));
      partial = '';
      cut = false;
      start = nl + 1;
    }
    if (cut) return;
    partial += chunk.slice(start, start + STDERR_LINE_MAX - partial.length);
    if (partial.length < STDERR_LINE_MAX) return;
    line(partial);
    partial = '';
    cut = true;
  });
  stream.on('end', () => {
    if (partial && !cut) line(partial);
    budget.report(report);
  });
  stream.on('error', () => undefined);
  return { lines: () => [...tail] };
}
