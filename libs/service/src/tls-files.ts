import { readFileSync, statSync } from 'node:fs';

/** Where a server's PEM private key and certificate chain are. */
export interface TlsFilePaths {
  readonly certFile: string;
  readonly keyFile: string;
}

/** A PEM private key and the certificate chain that goes with it. */
export interface TlsPair {
  readonly key: string;
  readonly cert: string;
}

/**
 * Reads the pair and checks that it makes a TLS context (PEM that parses, a
 * key that matches the certificate), so a bad file fails at start, or is
 * skipped on a reload, with a message naming it rather than at the first
 * handshake.
 */
export function readTlsPair(paths: TlsFilePaths): TlsPair {
  const read = (what: 'certFile' | 'keyFile'): string => {
    try {
      return readFileSync(paths[what], 'utf8');
    } catch (error) {
      throw new Error(`tls.${what}: cannot read ${paths[what]}: ${(error as Error).message}`, { cause: error });
    }
  };
  const pair = { cert: read('certFile'), key: read('keyFile') };
  try {
    // Loaded here, not with this module: every app imports it, and most serve no TLS.
    process.getBuiltinModule('node:tls').createSecureContext(pair);
  } catch (error) {
    throw new Error(`tls: ${paths.certFile} and ${paths.keyFile} make no TLS context: ${(error as Error).message}`, {
      cause: error,
    });
  }
  return pair;
}

export interface WatchTlsOptions {
  /** How often the files' modification times are looked at. Default 10 s. */
  readonly intervalMs?: number;
  /** A changed pair that could not be used (the previous one stays). */
  readonly onError: (error: Error) => void;
}

/**
 * Calls `onChange` with the pair read again whenever either file's
 * modification time changes (a mounted Secret that cert-manager renewed:
 * kubelet swaps the files in place). Returns a stop function.
 */
export function watchTlsPair(
  paths: TlsFilePaths,
  onChange: (pair: TlsPair) => void,
  options: WatchTlsOptions,
): () => void {
  const stamp = (): string => {
    try {
      return `${statSync(paths.certFile).mtimeMs}/${statSync(paths.keyFile).mtimeMs}`;
    } catch {
      return 'unreadable';
    }
  };
  let seen = stamp();
  const timer = setInterval(() => {
    const now = stamp();
    if (now === seen) return;
    seen = now;
    try {
      onChange(readTlsPair(paths));
    } catch (error) {
      options.onError(error as Error);
    }
  }, options.intervalMs ?? 10_000);
  timer.unref();
  return () => clearInterval(timer);
}

/** An app's `tls` option: a PEM pair, both paths or neither. */
export interface TlsOption {
  readonly certFile?: string | undefined;
  readonly keyFile?: string | undefined;
}

export interface AppTls {
  /** The pair as read at start. */
  readonly pair: TlsPair;
  /** Hands `apply` each pair the files change to, logging it (or why it cannot be used); returns a stop function. */
  watch(apply: (pair: TlsPair) => void): () => void;
}

/**
 * For an app's entry point: the pair its `tls` option names, undefined
 * without one. A pair it cannot use is written to stderr as
 * `<program>: <reason>` and the process exits 1, before anything starts.
 */
export function appTls(
  program: string,
  option: TlsOption,
  logger: { info(obj: object, msg: string): void; error(obj: object, msg: string): void },
): AppTls | undefined {
  const { certFile, keyFile } = option;
  if (certFile === undefined || keyFile === undefined) return undefined;
  const paths = { certFile, keyFile };
  let pair: TlsPair;
  try {
    pair = readTlsPair(paths);
  } catch (error) {
    process.stderr.write(`${program}: ${(error as Error).message}\n`);
    process.exit(1);
  }
  return {
    pair,
    watch: (apply) =>
      // A certificate renewed in place (cert-manager rewriting a mounted Secret) serves new connections at once.
      watchTlsPair(
        paths,
        (next) => {
          apply(next);
          logger.info({ certFile }, 'TLS certificate reloaded');
        },
        {
          onError: (error) =>
            logger.error(
              { err: error.message },
              'TLS files changed but cannot be used; serving the previous certificate',
            ),
        },
      ),
  };
}
