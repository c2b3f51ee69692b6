/** A pino log entry, as much of it as a person at the terminal is shown. */
export interface LogEntry {
  readonly level?: number;
  readonly msg?: string;
  readonly component?: string;
  readonly status?: number;
  /** Text, or an object: a scheduler's unschedulable reason `{stage, code, message}`. */
  readonly reason?: unknown;
  /** Text, or an object: pino writes an Error as `{type, message, stack}`. */
  readonly err?: unknown;
  /** What a refusal's answer said was wrong, with `status` (`runtime connect refused`). */
  readonly error?: unknown;
  /** The request field `error` is about, if one (`X-Runtime-Info.id`). */
  readonly field?: unknown;
  /** A refusal's body as it came, normally JSON text (`scheduler refused the tunnel`). */
  readonly body?: string;
  /** The URL a dial went to (`scheduler refused the tunnel`, `scheduler unreachable; dialling again`). */
  readonly url?: string;
  /** A line a sandbox's server wrote to its stderr (`stderr`): the entry says nothing without it. */
  readonly line?: string;
  /** The sandbox class an entry is about: a runtime serving several, the reader cannot tell which otherwise. */
  readonly class?: unknown;
  /** A server's last stderr lines, logged when it exited (`start failed`, `sandbox died`): most often, why. */
  readonly stderrTail?: unknown;
}

/** C0 and C1 controls, DEL and the JSON line separators: what could end a terminal line or steer the terminal. */
const CONTROL = /[\p{Cc}\u2028\u2029]/gu;

/**
 * `text` with every control character written as a `\uXXXX` escape. pino
 * escapes them in its JSON; a line for a person undoes that, and a value
 * that came from elsewhere (an error's message, a refusal's body from
 * whatever answered the URL) could otherwise start a line of its own or
 * send the terminal escape sequences.
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** A log entry as one short line: the message, its class if it names one, and what explains it. */
export function lineOf(entry: LogEntry): string {
  const detail = refusal(entry) ?? entry.status ?? entry.reason ?? entry.err ?? entry.line;
  const explained = [detail !== undefined ? detailText(detail) : undefined, stderrText(entry.stderrTail)]
    .filter((part) => part !== undefined)
    .join('; ');
  const subject = typeof entry.class === 'string' ? `, class ${entry.class}` : '';
  return printable(`${entry.msg ?? ''}${subject}${explained ? ` (${explained})` : ''}`);
}

/** A server's last stderr lines, as the part of a line that tells why it exited; none, if it wrote none. */
function stderrText(tail: unknown): string | undefined {
  if (!Array.isArray(tail) || tail.length === 0) return undefined;
  return `its last stderr: ${tail.map(String).join(' | ')}`;
}

/** A refusal's status with what its answer said was wrong (a status alone says little), if the entry has both. */
function refusal({ status, error, field }: LogEntry): string | undefined {
  if (status === undefined || typeof error !== 'string') return undefined;
  return `HTTP ${status}: ${error}${typeof field === 'string' ? `, field ${field}` : ''}`;
}

/** An object's own `message` where it has one, else its JSON: never `[object Object]`. */
function detailText(detail: unknown): string {
  if (typeof detail !== 'object' || detail === null) return String(detail);
  const { message } = detail as { message?: unknown };
  return typeof message === 'string' ? message : JSON.stringify(detail);
}

/** Parses one line pino wrote; a line that is not JSON comes back as a warning carrying it. */
export function parseEntry(line: string): LogEntry {
  try {
    return JSON.parse(line) as LogEntry;
  } catch {
    return { level: 40, msg: line.trim() };
  }
}

/**
 * A pino destination writing each entry to stderr as `  [component] message`,
 * as `switchyard up --processes` echoes its children: the cluster's own
 * output stays readable, and its warnings still show.
 */
export function terminalLines(fallbackComponent: string): { write(line: string): void } {
  return {
    write(line: string) {
      const entry = parseEntry(line);
      process.stderr.write(`  [${printable(String(entry.component ?? fallbackComponent))}] ${lineOf(entry)}\n`);
    },
  };
}
