import { LRUCache } from 'lru-cache';
import type { Redis } from 'ioredis';
import { isIdentityValue } from '@switchyard/protocol';
import { systemClock } from '@switchyard/clock';
import { RedisBackoff, redisTlsOptions } from '@switchyard/service';
import type { RouteCacheRedisOp } from './metrics.ts';
import type { ThrottledLog } from './throttled-log.ts';

/** Where a thread (legacy session) or a named process is served. */
export interface Route {
  readonly runtime: string;
  /** Full upstream MCP endpoint, e.g. `http://owner/api/proxy/<runtime>/mcp`. */
  readonly url: string;
  /** Principal the session is bound to; absent when auth is off. */
  readonly principal?: string;
  /** True when `url` is a runtime's direct listener rather than the scheduler proxy. */
  readonly direct?: boolean;
}

export interface RouteCacheConfig {
  readonly maxEntries: number;
  readonly ttlMs: number;
  readonly redisUrl?: string;
  /** Prefix of every key in Redis; default REDIS_ROUTE_PREFIX. */
  readonly redisKeyPrefix?: string;
  /** Where Redis trouble is reported: throttled, since while Redis is away every lookup fails alike. */
  readonly upstreamLog: ThrottledLog;
  readonly onLookup?: (result: 'hit' | 'miss', tier: 'memory' | 'redis') => void;
  /** A command Redis failed, or that could not be sent to it: the lookup missed, the change was dropped. */
  readonly onRedisFailure?: (op: RouteCacheRedisOp) => void;
}

/** Default key prefix in Redis; replicas of one deployment share it, deployments sharing a Redis each need their own. */
export const REDIS_ROUTE_PREFIX = 'switchyard:route:';
/**
 * How long a command may go unanswered; a connection that then brought no
 * byte for as long is dropped and dialled again (ioredis' socketTimeout). A
 * Redis that stopped answering on a connection still open (stopped,
 * overloaded, its host gone without a reset, a failover's old primary)
 * would otherwise hold each lookup and write for this long, for as long as
 * the kernel keeps the connection: some 15 minutes after a host is lost.
 * A new connection is not ready before Redis answers, and until then every
 * command fails at once (no offline queue).
 */
const REDIS_COMMAND_TIMEOUT_MS = 500;
/** How stale the time that ages entries may be; nothing against TTLs of minutes. */
const TTL_RESOLUTION_MS = 1000;

/**
 * A memory hit renews the route's key in Redis once this share of the TTL has
 * passed since it was written or last renewed there: a round trip per route
 * every few minutes, not one per request. The key may so expire up to that
 * share of the TTL before this replica's copy does.
 */
const REDIS_RENEW_AFTER_TTL_SHARE = 0.25;

/** How long the first requests wait for the first connection to Redis; later ones never wait for one. */
const REDIS_FIRST_CONNECT_WAIT_MS = 1000;

/** The Redis URL as logs may show it: without credentials. */
function redisLabel(url: string): string {
  return URL.canParse(url) ? `${new URL(url).protocol}//${new URL(url).host}` : 'redis';
}

/**
 * A primary demoted by a failover stays up and keeps its connections, and
 * answers every write (GETEX renews, so reads too) with READONLY; a managed
 * Redis moves its endpoint to the new primary, which only a new connection
 * reaches. Reconnect then, without resending: the command was a cache's.
 */
function reconnectsOnError(error: Error): 1 | false {
  return error.message.startsWith('READONLY') ? 1 : false;
}

/**
 * Loaded only when a Redis URL is configured: the client library is a few
 * MB of a gateway's resident memory that most deployments never use.
 * Resolves once connected, or after REDIS_FIRST_CONNECT_WAIT_MS without.
 * No offline queue: while Redis is away a command fails at once (a miss,
 * a dropped write) instead of holding its request for the command timeout.
 * Redials back off (RedisBackoff): a Redis that will not serve is dialled
 * at a pace that slows to a dial every second or so (a random pause of up
 * to 2 s each), spread among the gateways.
 */
async function connectRedis(url: string, log: ThrottledLog): Promise<Redis | undefined> {
  const label = redisLabel(url);
  try {
    const { Redis } = await import('ioredis');
    const backoff = new RedisBackoff(systemClock);
    const redis = new Redis(url, {
      ...redisTlsOptions(url),
      lazyConnect: false,
      maxRetriesPerRequest: 1,
      commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
      socketTimeout: REDIS_COMMAND_TIMEOUT_MS,
      enableOfflineQueue: false,
      // Unanswered when their connection went, they failed already: sent late, a write could undo a later delete.
      autoResendUnfulfilledCommands: false,
      reconnectOnError: reconnectsOnError,
      retryStrategy: () => backoff.nextDelayMs(),
    });
    // Its return is said too, or the warnings below would just stop; `lostAtMs` is when a ready connection
    // went, or when the first one failed (a gateway started while its Redis was away).
    let ready = false;
    let lostAtMs: number | undefined;
    // ioredis reconnects by itself; an unhandled 'error' event would crash the process.
    redis.on('error', (error: Error) => {
      if (!ready) lostAtMs ??= performance.now();
      log.warn(label, 'route cache redis error', { err: error.message });
    });
    redis.on('close', () => {
      if (ready) lostAtMs ??= performance.now();
      ready = false;
    });
    redis.on('ready', () => {
      ready = true;
      backoff.ready();
      if (lostAtMs === undefined) return;
      log.info(label, 'route cache redis connected again', { awayMs: Math.round(performance.now() - lostAtMs) });
      lostAtMs = undefined;
    });
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, REDIS_FIRST_CONNECT_WAIT_MS);
      redis.once('ready', () => (clearTimeout(timer), resolve()));
    });
    return redis;
  } catch (error) {
    log.error(label, 'route cache redis unavailable', { err: (error as Error).message });
    return undefined;
  }
}

/** Longest route URL taken from Redis: a replica's address and a runtime id with room to spare. */
const ROUTE_URL_LENGTH_MAX = 1024;

/** An `http:`/`https:` URL of an MCP endpoint, as `routeOf` in routing.ts builds them. */
function isRouteUrl(value: unknown): value is string {
  if (typeof value !== 'string' || value.length > ROUTE_URL_LENGTH_MAX || !URL.canParse(value)) return false;
  const url = new URL(value);
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.pathname.endsWith('/mcp');
}

/**
 * A route as this gateway writes one. Redis is shared, and what another
 * replica (of another version, or anything else that writes there) left is
 * checked as a scheduler's answer is: a value taken on trust that no request
 * can use would fail every request of its session, and a hit renews it.
 */
function isRoute(value: unknown): value is Route {
  const v = value as Partial<Record<keyof Route, unknown>> | null;
  return (
    typeof v === 'object' &&
    v !== null &&
    isIdentityValue(v.runtime) &&
    isRouteUrl(v.url) &&
    (v.principal === undefined || isIdentityValue(v.principal)) &&
    (v.direct === undefined || typeof v.direct === 'boolean')
  );
}

/** A route kept in memory beside Redis, with when a hit next renews its key there (`performance.now()` ms). */
class Renewed {
  readonly route: Route;
  redisRenewAtMs: number;

  constructor(route: Route, redisRenewAtMs: number) {
    this.route = route;
    this.redisRenewAtMs = redisRenewAtMs;
  }
}

/**
 * What memory holds for a key: with Redis a Renewed, without it (most
 * deployments) the route itself. A wrapper there would be one object and
 * one number more per session for a time nothing reads: about 60 bytes
 * each, 0.6 MB of a gateway holding 10,000 sessions.
 */
type Entry = Route | Renewed;

const routeOf = (entry: Entry): Route => (entry instanceof Renewed ? entry.route : entry);

/** The size of every entry: the memory tier is bounded by count (see the constructor). */
const ONE_ENTRY = (): number => 1;

/**
 * Bounded LRU with a TTL renewed on use, optionally backed by Redis. Redis
 * is a cache too: when it fails, lookups fall back to a miss (the caller
 * reschedules) and writes are dropped with a warning, never an error. Use
 * renews a route in Redis too, so a session served from one replica's
 * memory stays shared with the others; a route deleted there stays deleted.
 */
export class RouteCache {
  readonly #memory: LRUCache<string, Entry>;
  readonly #redis: Promise<Redis | undefined> | undefined;
  readonly #ttlMs: number;
  readonly #prefix: string;
  readonly #config: RouteCacheConfig;
  #redisLabel = '';
  #closed = false;

  constructor(config: RouteCacheConfig) {
    this.#config = config;
    this.#ttlMs = config.ttlMs;
    this.#prefix = config.redisKeyPrefix ?? REDIS_ROUTE_PREFIX;
    this.#memory = new LRUCache<string, Entry>({
      // A count, as a size of 1 per entry: given `max`, the library allocates
      // its arrays for that many entries at once, however few a gateway
      // holds (4.4 MB at the default 100,000: 3.2 MB of V8 heap, filled at
      // once, and 1.2 MB of typed arrays); given `maxSize` alone, they grow
      // with the entries held (0.6 MB at 10,000).
      maxSize: config.maxEntries,
      sizeCalculation: ONE_ENTRY,
      ttl: config.ttlMs,
      updateAgeOnGet: true,
      // The library caches the time it reads for this long, behind a timer it
      // sets anew each time: at its default of 1 ms, one timer per request.
      ttlResolution: TTL_RESOLUTION_MS,
    });
    if (config.redisUrl) {
      this.#redisLabel = redisLabel(config.redisUrl);
      this.#redis = connectRedis(config.redisUrl, config.upstreamLog);
    }
  }

  /**
   * The route this replica holds in memory (a hit renews its TTL), at once:
   * the lookup of almost every request, so it costs no promise. Undefined on
   * a miss, which `remote` then takes to Redis.
   */
  local(key: string): Route | undefined {
    const entry = this.#memory.get(key);
    if (!entry) return undefined;
    this.#config.onLookup?.('hit', 'memory');
    if (!(entry instanceof Renewed)) return entry;
    if (entry.redisRenewAtMs <= performance.now()) this.#renew(key, entry);
    return entry.route;
  }

  #keep(key: string, route: Route): void {
    if (!this.#redis) return void this.#memory.set(key, route);
    this.#memory.set(key, new Renewed(route, performance.now() + this.#ttlMs * REDIS_RENEW_AFTER_TTL_SHARE));
  }

  /** PEXPIRE, not SET: it renews a key that is there and brings back none that was deleted. */
  #renew(key: string, entry: Renewed): void {
    const client = this.#client();
    if (!client) return;
    entry.redisRenewAtMs = performance.now() + this.#ttlMs * REDIS_RENEW_AFTER_TTL_SHARE;
    client
      .then((redis) => redis?.pexpire(this.#prefix + key, this.#ttlMs))
      .catch((error: unknown) => this.#failed('renew', error));
  }

  /** The Redis client to ask now; undefined without Redis or once closed. */
  #client(): Promise<Redis | undefined> | undefined {
    if (this.#closed || !this.#redis) return undefined;
    return this.#redis;
  }

  #failed(what: RouteCacheRedisOp, error: unknown): void {
    this.#config.onRedisFailure?.(what);
    this.#config.upstreamLog.warn(this.#redisLabel, `route cache redis ${what} failed`, {
      err: (error as Error)?.message,
    });
  }

  /** The route from Redis (then kept in memory too), for a key `local` missed; undefined without Redis. */
  async remote(key: string): Promise<Route | undefined> {
    const client = this.#client();
    if (!client) {
      this.#config.onLookup?.('miss', 'memory');
      return undefined;
    }
    try {
      const redis = await client;
      const text = await redis?.getex(this.#prefix + key, 'PX', this.#ttlMs);
      const parsed: unknown = text ? JSON.parse(text) : undefined;
      if (isRoute(parsed)) {
        // GETEX renewed it in Redis.
        this.#keep(key, parsed);
        this.#config.onLookup?.('hit', 'redis');
        return parsed;
      }
    } catch (error) {
      this.#failed('read', error);
    }
    this.#config.onLookup?.('miss', 'redis');
    return undefined;
  }

  async set(key: string, route: Route): Promise<void> {
    this.#keep(key, route);
    const client = this.#client();
    if (!client) return;
    try {
      await (await client)?.set(this.#prefix + key, JSON.stringify(route), 'PX', this.#ttlMs);
    } catch (error) {
      this.#failed('write', error);
    }
  }

  /**
   * Sets `key` to `to` if this replica still holds `from` for it, and says
   * whether it did: a route learnt in the background must not bring back one
   * evicted meanwhile (its session ended or lost its runtime).
   */
  async replace(key: string, from: Route, to: Route): Promise<boolean> {
    const held = this.#memory.peek(key);
    if (held === undefined || routeOf(held).url !== from.url) return false;
    await this.set(key, to);
    return true;
  }

  async delete(key: string): Promise<void> {
    this.#memory.delete(key);
    const client = this.#client();
    if (!client) return;
    try {
      await (await client)?.del(this.#prefix + key);
    } catch (error) {
      this.#failed('delete', error);
    }
  }

  get size(): number {
    return this.#memory.size;
  }

  /** Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#memory.clear();
    const redis = await this.#redis;
    if (redis) {
      try {
        await redis.quit();
      } catch {
        redis.disconnect();
      }
    }
  }
}
