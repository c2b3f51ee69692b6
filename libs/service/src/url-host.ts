import { isIP } from 'node:net';

/** The listen hosts that mean "every interface": no other machine dials them. */
export const WILDCARD_HOSTS: readonly string[] = ['0.0.0.0', '::'];

/**
 * `host` as the authority of a URL takes it: an IPv6 literal in brackets
 * (RFC 3986 §3.2.2), anything else as given. A listen host is written bare
 * (`::1`, as `net.Server.listen` takes it), and `http://::1:8080` is no URL.
 */
export function urlHost(host: string): string {
  return isIP(host) === 6 ? `[${host}]` : host;
}
