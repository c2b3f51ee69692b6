export { loadAppConfig, loadConfig } from './config/load.ts';
export type { LoadConfigOptions, LoadConfigWithDerive } from './config/load.ts';
export { ConfigError } from './config/error.ts';
export { configFields, envNameOf, ENV_PREFIX } from './config/fields.ts';
export type { ConfigField, ConfigMeta, FieldKind } from './config/fields.ts';
export { REDACTED, redactConfig, printableConfig, helpText, markdownReference } from './config/render.ts';
export { createLogger, ALWAYS_REDACTED, LOG_CENSOR, LOG_LEVELS } from './logger.ts';
export type { Logger, LoggerOptions } from './logger.ts';
export { createMetrics, metricsHandler } from './metrics.ts';
export type { AppName, GaugeSample, Metrics } from './metrics.ts';
export { createLifecycle } from './lifecycle.ts';
export type {
  Lifecycle,
  LifecycleOptions,
  LifecycleLogger,
  LifecycleState,
  ShutdownHook,
  ShutdownResult,
  SignalSource,
  Handler,
} from './lifecycle.ts';
export {
  listen,
  closeServer,
  exitOnListenError,
  ListenError,
  LISTEN_BACKLOG,
  SERVER_KEEP_ALIVE_MS,
  SERVER_TCP_KEEP_ALIVE_DELAY_MS,
  SERVER_TIMEOUT_CHECK_INTERVAL_MS,
  INTERNAL_HEADERS_TIMEOUT_MS,
  deadlineOptions,
  tcpKeepAliveOptions,
} from './http.ts';
export type { CloseServerOptions, CloseResult, RequestDeadlines } from './http.ts';
export { capConnections, CONNECTIONS_MAX_DEFAULT, CONNECTIONS_REFUSED_LOG_INTERVAL_MS } from './connections.ts';
export type { ConnectionCapOptions } from './connections.ts';
export { closeStalledWrites, WRITE_STALL_TIMEOUT_MS_DEFAULT } from './write-stalls.ts';
export type { WriteStallOptions } from './write-stalls.ts';
export { createProbeServer, withProbes } from './probe-server.ts';
export type { ProbeRoutes, ProbeServerOptions } from './probe-server.ts';
export { urlHost, WILDCARD_HOSTS } from './url-host.ts';
export { anyPortFetch } from './any-port-fetch.ts';
export { redisUrlProblem, redisTlsOptions } from './redis-url.ts';
export { RedisBackoff, REDIS_HEALTHY_AFTER_MS, REDIS_REDIAL_FIRST_MS, REDIS_REDIAL_MAX_MS } from './redis-backoff.ts';
export { serveH2c } from './h2c.ts';
export type { H2cListener, H2cOptions } from './h2c.ts';
export { secretSource } from './secrets.ts';
export { REVOCATION_CHECK_MS, watchTokenRevocations } from './revocation.ts';
export type { TokenRevocations, TokenRevocationsOptions } from './revocation.ts';
export { appTls } from './tls-files.ts';
export type { AppTls, TlsOption, TlsPair } from './tls-files.ts';
export { LINGER_DEFAULTS, readBody } from './body.ts';
export type { LingerLimits, ReadBodyOptions } from './body.ts';
export {
  processConfigFields,
  hostIdentityField,
  tlsFilesField,
  timerBounded,
  TIMER_DELAY_MS_MAX,
  httpUrl,
  redisUrlField,
  connectionsMaxField,
} from './config/common.ts';
