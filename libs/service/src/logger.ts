import { pino } from 'pino';
import type { DestinationStream, Logger } from 'pino';

export type { Logger } from 'pino';

/** Levels an app's `logLevel` option accepts. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** What replaces a redacted value in log lines. */
export const LOG_CENSOR = '[redacted]';

/**
 * Paths always redacted, whatever the caller adds: credentials in headers,
 * cookies and token-like fields at the top level and one level down.
 * pino paths match exact keys; `*` stands for one level.
 */
export const ALWAYS_REDACTED: readonly string[] = [
  'authorization',
  'cookie',
  'token',
  'tokens',
  'joinToken',
  'joinTokens',
  'password',
  'secret',
  'redisUrl',
  'headers.authorization',
  'headers.cookie',
  'headers["set-cookie"]',
  'headers["proxy-authorization"]',
  '*.authorization',
  '*.cookie',
  '*.token',
  '*.tokens',
  '*.joinToken',
  '*.joinTokens',
  '*.password',
  '*.secret',
  '*.redisUrl',
  '*.headers.authorization',
  '*.headers.cookie',
  '*.headers["set-cookie"]',
  '*.headers["proxy-authorization"]',
];

export interface LoggerOptions {
  /** Minimum level. Default `info`. */
  readonly level?: (typeof LOG_LEVELS)[number];
  /** Logged as `name` on every line, e.g. `scheduler`. */
  readonly name: string;
  /** Extra pino redaction paths, added to ALWAYS_REDACTED. */
  readonly redact?: readonly string[];
  /** Where lines go. Default: stdout (pino's fast sync-free writer). */
  readonly destination?: DestinationStream;
}

/**
 * A pino JSON logger. Guarantees: ALWAYS_REDACTED paths (and `redact`) are
 * replaced with LOG_CENSOR. Not guaranteed: secrets embedded inside free
 * text (a message string or a URL) are not found; do not log them.
 */
export function createLogger(options: LoggerOptions): Logger {
  const paths = [...new Set([...ALWAYS_REDACTED, ...(options.redact ?? [])])];
  const settings = {
    name: options.name,
    level: options.level ?? 'info',
    redact: { paths, censor: LOG_CENSOR },
  };
  if (options.destination) return pino(settings, options.destination);
  // pino's own default (asynchronous writes to stdout, flushed synchronously at exit), built here so
  // that abandonOutput can reach it.
  const stdout = pino.destination({ dest: 1, sync: false });
  const logger = pino(settings, stdout);
  stdoutStreams.set(logger, stdout);
  return logger;
}

const stdoutStreams = new WeakMap<object, { flushSync(): void }>();

/**
 * Gives up what a logger of createLogger (writing to stdout) still holds, instead of writing it at
 * exit: for a process whose output's reader is gone (its parent died). pino's flush at exit writes
 * synchronously and retries any failure, a broken pipe too, forever: the process would never exit.
 * A logger with a destination of its own is left alone.
 */
export function abandonOutput(logger: object): void {
  const stream = stdoutStreams.get(logger);
  if (stream) stream.flushSync = () => {};
}
