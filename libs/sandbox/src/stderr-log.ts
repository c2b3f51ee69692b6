import type { Readable } from 'node:stream';
import type { Clock } from '@switchyard/clock';
import type { Logger } from './types.ts';

/** Longest stderr line logged, characters; the rest of a longer line is dropped as it arrives. */
const STDERR_LINE_MAX = 2048;
/** Lines of one child's stderr logged per window; the others are counted. */
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
 * Logs a child's stderr line by line, at most STDERR_LINES_MAX lines per
 * STDERR_WINDOW_MS, and once per window (and when the stream ends) how many
 * lines it dropped. The stream is always read to its end, so a child that
 * logs faster than that never blocks on a full pipe; and no line is held
 * past STDERR_LINE_MAX characters, so a child that writes without newlines
 * cannot grow the runtime's memory. Its last lines, dropped ones included
 * (usually the explanation of a crash), are kept for the log of its death.
 */
export function logStderr(stream: Readable, source: StderrSource, logger: Logger, clock: Clock): StderrTail {
  const tail: string[] = [];
  let partial = '';
  /** The current line outgrew STDERR_LINE_MAX: what is left of it is dropped up to its newline. */
  let cut = false;
  let windowStartMs = clock.now();
  let logged = 0;
  let dropped = 0;
  const report = (): void => {
    if (dropped === 0) return;
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
    dropped = 0;
  };
  const line = (raw: string): void => {
    const text = raw.replace(/\r$/, '');
    if (tail.push(text.slice(0, STDERR_TAIL_LINE_MAX)) > STDERR_TAIL_LINES) tail.shift();
    const now = clock.now();
    if (now - windowStartMs >= STDERR_WINDOW_MS) {
      report();
      windowStartMs = now;
      logged = 0;
    }
    if (logged >= STDERR_LINES_MAX) {
      dropped++;
      return;
    }
    logged++;
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
    report();
  });
  stream.on('error', () => undefined);
  return { lines: () => [...tail] };
}
