import { randomBytes } from 'node:crypto';

/**
 * A join token for a local cluster, or the peer token its replicas share.
 * Hex, not base64url: one base64url token in 64 starts with `-`, and then
 * reads as an option where it is passed on a command line (`--join-tokens
 * <token>` to the replicas of `up --processes`, the `runtime join … --token
 * <token>` that `up` prints).
 */
export function newJoinToken(): string {
  return randomBytes(24).toString('hex');
}
