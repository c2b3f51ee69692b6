import { randomBytes } from 'node:crypto';
import { RUNTIME_INSTANCE_PATTERN } from '@switchyard/protocol';

/** A fresh runtime instance id (see `RUNTIME_INSTANCE_HEADER`): 128 random bits, 22 base64url characters. */
export function newInstanceId(): string {
  return randomBytes(16).toString('base64url');
}

/**
 * The instance id a connect request names; undefined when absent or malformed, as for a runtime of an
 * earlier release (which takes over a live tunnel of its id as before): never a refusal.
 */
export function parseInstance(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' && RUNTIME_INSTANCE_PATTERN.test(value) ? value : undefined;
}

/**
 * Whether `tunnel` belongs to a runtime other than the dialling `instance` that still lives: both named
 * their instance, the two differ, and the tunnel's runtime pings on it. A tunnel whose pings stopped
 * (`peerQuiet`: its runtime restarted, or its connection went silent) is not held against a newcomer.
 */
export function heldByAnotherLiveRuntime(
  tunnel: { readonly instance: string | undefined; readonly peerQuiet: boolean; readonly closed: boolean },
  instance: string | undefined,
): boolean {
  if (instance === undefined || tunnel.instance === undefined || tunnel.closed) return false;
  return tunnel.instance !== instance && !tunnel.peerQuiet;
}
