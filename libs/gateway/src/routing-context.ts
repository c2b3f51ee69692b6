// What routing reads: the gateway's parts, built once (RoutingContext), and
// one request after the security gates (Routed).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { Clock } from '@switchyard/clock';
import type { ClassScopes } from './class-scopes.ts';
import type { ToolScopes } from './tool-scopes.ts';
import type { EventStreamUpstream } from './event-streams.ts';
import type { CloseWatch } from './exchange.ts';
import type { IdentityStrategy } from './identity.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { GatewayLogger } from './options.ts';
import type { RelayConnections } from './relay-connections.ts';
import type { RequestTarget } from './request-target.ts';
import type { RouteCache } from './route-cache.ts';
import type { SchedulerClient } from './scheduler-client.ts';
import type { StandingStreams } from './standing-streams.ts';
import type { ThrottledLog } from './throttled-log.ts';
import type { MessageInfo } from './wire.ts';

/** Everything a routed request needs; built once per gateway. */
export interface RoutingContext {
  readonly dispatcher: Dispatcher;
  /** For `GET` event streams through a scheduler (HTTP/2, see `eventStreamsOverHttp2`); else `dispatcher`. */
  readonly eventStreams?: EventStreamUpstream;
  /** For every other request through a scheduler (see `relayConnections`); else `dispatcher`. */
  readonly relays?: RelayConnections;
  readonly scheduler: SchedulerClient;
  readonly cache: RouteCache;
  /** The standing event streams being relayed, for Gateway.endEventStreams. */
  readonly standing: StandingStreams;
  /** Route keys whose runtime is being looked up again after a replica forwarded their request (one lookup each at once). */
  readonly following: Set<string>;
  readonly clock: Clock;
  readonly logger: GatewayLogger;
  readonly metrics: GatewayMetrics;
  readonly upstreamMode: 'proxy' | 'direct';
  /** `Authorization` for runtimes' direct listeners, asked per request; sent on direct routes only. */
  readonly upstreamAuthorization?: () => string | undefined;
  /** `Authorization` for schedulers' API, asked per request; sent on routes through a scheduler (relays: on the upgrade only). */
  readonly schedulerAuthorization?: () => string | undefined;
  /** Where trouble with an upstream is reported, throttled per upstream (a refused token, a failing TLS handshake). */
  readonly upstreamLog: ThrottledLog;
  readonly idleTimeoutMs: number;
  readonly chains: {
    readonly class: readonly IdentityStrategy[];
    readonly process: readonly IdentityStrategy[];
    readonly thread: readonly IdentityStrategy[];
  };
  readonly defaultClass: string;
  /** The classes held to scopes (auth.classScopes); absent when none is. */
  readonly classScopes?: ClassScopes;
  /** The tools held to scopes (auth.toolScopes); absent when none is. */
  readonly toolScopes?: ToolScopes;
}

/** One request after the security gates: who sent it and what it carries. */
export interface Routed {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly target: RequestTarget;
  readonly principal?: string;
  /** The scopes its token grants, when classes or tools are held to scopes (see Credential.scopes). */
  readonly scopes?: ReadonlySet<string>;
  readonly body?: Buffer;
  readonly info?: MessageInfo;
  readonly signal: AbortSignal;
  /** The gateway's listener for `res` closing, which tells the relay (see CloseWatch). */
  readonly closeWatch?: CloseWatch;
}
