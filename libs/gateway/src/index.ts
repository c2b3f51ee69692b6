export { createGateway } from './gateway.ts';
export { answerClientError } from './client-error.ts';
export { createGatewayServer } from './server.ts';
export type { GatewayServerOptions } from './server.ts';
export type { Gateway, GatewayHandler, GatewayStats } from './gateway.ts';
export { GATEWAY_DEFAULTS, REDIS_KEY_PREFIX_PATTERN } from './options.ts';
export type {
  GatewayOptions,
  GatewayLogger,
  IdentityOptions,
  RouteCacheOptions,
  AuthOptions,
  TokenOption,
} from './options.ts';
export { JWT_ALGORITHMS, JWT_CLAIM_NAME } from './jwt-claims.ts';
export type { JwtAlgorithm } from './jwt-claims.ts';
export { parseStrategy } from './identity.ts';
export { originEntryProblem } from './origins.ts';
export { trustedProxyProblem } from './client-address.ts';
export type { IdentityStrategy } from './identity.ts';
export { SUPPORTED_PROTOCOL_VERSIONS, STATELESS_PROTOCOL_VERSION } from './wire.ts';
export { REDIS_ROUTE_PREFIX } from './route-cache.ts';
export { relayConnector } from './relay-connections.ts';
export { REFUSAL_REASONS, ROUTE_CACHE_REDIS_OPS, UPSTREAM_ERROR_REASONS } from './metrics.ts';
export type { RelayConnector } from './relay-connections.ts';
