export { createSandboxHost, SANDBOX_DEFAULTS } from './host.ts';
export type { SandboxHost } from './host.ts';
export type {
  EngineConfig,
  HostRequest,
  HostResponse,
  HostStats,
  Logger,
  MeteringEvent,
  MeteringSink,
  SandboxHostOptions,
  SandboxTrouble,
  StateReporter,
} from './types.ts';
export type { Engine, EngineContext, ExitCause, SandboxInstance } from './engine.ts';
export { TOOL_CALL_OUTCOMES } from './tool-calls.ts';
export type { ToolCallOutcome, ToolCallSink } from './tool-calls.ts';
export { logMeteringSink, noMeteringSink } from './metering.ts';
export { METERING_QUEUE_LENGTH_MAX_DEFAULT, redisMeteringSink } from './metering-redis.ts';
export type { RedisMeteringSinkOptions } from './metering-redis.ts';
