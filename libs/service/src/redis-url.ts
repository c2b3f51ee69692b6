// The Redis URLs of every app (a gateway's route cache, a runtime's
// metering stream) are read by ioredis, which misreads some silently: they
// are checked here once, alike, and dialled with the same TLS options.
import { isIP } from 'node:net';

/**
 * Query parameters a Redis URL may carry, with their values: ioredis takes
 * any parameter as a client option (as a string, so
 * `enableOfflineQueue=false` would turn it on), over the caller's own.
 */
const REDIS_URL_PARAMS: Readonly<Record<string, RegExp>> = { family: /^[046]$/, db: /^\d{1,5}$/ };

/**
 * What is wrong with `url` as a Redis URL, or undefined:
 * `redis://` or `rediss://` (TLS), optional `user:password@` (percent-encoded),
 * a host, optional port, and optional database number (`/3`). Checked at start:
 * ioredis reads a password with an unencoded `#`, `/`, `?` or `@`, a database
 * that is no number or another scheme as something else, and an app would
 * run without its Redis (or dial the wrong place) until someone read its
 * log. `REDISS://` is refused too: ioredis turns TLS on for `rediss://` only,
 * and would send the password in clear. The problem never quotes the URL,
 * which may hold a password.
 */
export function redisUrlProblem(url: string): string | undefined {
  if (!/^rediss?:\/\//.test(url)) return 'must start with redis:// or rediss:// (TLS), in lower case';
  if (!URL.canParse(url)) {
    return 'is not a valid URL: percent-encode characters such as @ : / ? # % in the user name and password';
  }
  const parsed = new URL(url);
  if (parsed.hostname === '') return 'names no host';
  try {
    decodeURIComponent(parsed.username);
    decodeURIComponent(parsed.password);
  } catch {
    return 'has a user name or password with a stray %: write it as %25';
  }
  if (parsed.pathname !== '' && parsed.pathname !== '/' && !/^\/\d{1,5}$/.test(parsed.pathname)) {
    return 'may have a database number as its path (redis://host:6379/3), nothing else';
  }
  if (parsed.hash !== '') return 'has a fragment (#...): percent-encode a # in the password as %23';
  for (const [name, value] of parsed.searchParams) {
    const pattern = Object.hasOwn(REDIS_URL_PARAMS, name) ? REDIS_URL_PARAMS[name] : undefined;
    if (!pattern) return `takes no query parameter ${JSON.stringify(name)} (only family and db)`;
    if (!pattern.test(value)) return `has a query parameter ${name} with a value ioredis would misread`;
  }
  return undefined;
}

/**
 * ioredis options for `url` (one redisUrlProblem passed): for `rediss://` to
 * a host name, TLS that names it (SNI), which ioredis leaves out. A shared
 * TLS endpoint of a managed Redis, or a proxy passing TLS through, picks its
 * certificate and the Redis behind by that name and refuses a client that
 * gives none. An IP address is no name to give.
 */
export function redisTlsOptions(url: string): { tls?: { servername: string } } {
  const { protocol, hostname } = new URL(url);
  return protocol === 'rediss:' && isIP(hostname.replace(/^\[|\]$/g, '')) === 0
    ? { tls: { servername: hostname } }
    : {};
}
