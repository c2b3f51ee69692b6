/** A pino log entry, as much of it as a person at the terminal is shown. */
export interface LogEntry {
  readonly level?: number;
  readonly msg?: string;
  readonly component?: string;
  readonly status?: number;
  readonly reason?: string;
  readonly err?: string;
  /** A refusal's body as it came, normally JSON text (`scheduler refused the tunnel`). */
  readonly body?: string;
}

/** A log entry as one short line: the message, and the one detail that explains it. */
export function lineOf(entry: LogEntry): string {
  const detail = entry.status ?? entry.reason ?? entry.err;
  return `${entry.msg ?? ''}${detail !== undefined ? ` (${String(detail)})` : ''}`;
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
      process.stderr.write(`  [${entry.component ?? fallbackComponent}] ${lineOf(entry)}\n`);
    },
  };
}
