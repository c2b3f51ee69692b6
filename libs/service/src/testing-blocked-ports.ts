// Node's fetch refuses the ports browsers block (the fetch standard's "bad
// ports") before it dials, saying only "bad port"; a Switchyard process
// served on one is still a legitimate deployment. Tests that show a path
// reaches such a port take the first one free on the machine.
import { ListenError } from './http.ts';

/** Ports on the fetch standard's list of bad ports that a process without privileges may bind. */
export const FETCH_BLOCKED_PORTS: readonly number[] = [6000, 6665, 6666, 6667, 6668, 6669, 10080];

/**
 * The first of FETCH_BLOCKED_PORTS that `start` binds, with what it started;
 * undefined when each one is taken (or refused), so the caller can skip
 * saying so. Any failure other than the port being taken is thrown.
 */
export async function onBlockedPort<T>(
  start: (port: number) => Promise<T>,
): Promise<{ port: number; started: T } | undefined> {
  for (const port of FETCH_BLOCKED_PORTS) {
    try {
      return { port, started: await start(port) };
    } catch (error) {
      const code = error instanceof ListenError ? error.code : (error as NodeJS.ErrnoException).code;
      if (code !== 'EADDRINUSE' && code !== 'EACCES') throw error;
    }
  }
  return undefined;
}
