export {
  IDENTITY_HEADERS,
  RUNTIME_INFO_HEADER,
  RUNTIME_LIVENESS_HEADER,
  RUNTIME_INSTANCE_HEADER,
  RUNTIME_INSTANCE_PATTERN,
  MCP_SESSION_HEADER,
  DEFAULT_CLASS,
  IDENTITY_VALUE_LENGTH_MAX,
  IDENTITY_VALUE_PATTERN,
  identityValueSchema,
  isIdentityValue,
} from './identity.ts';
export type { Identity } from './identity.ts';
export {
  FORWARDED_HEADER_BYTES_MAX,
  HOP_BY_HOP_HEADERS,
  HTTP2_HEADER_FIELDS_MAX,
  ORIGIN_WIDE_RESPONSE_HEADERS,
  PROXY_ERRORS,
  PROXY_ERROR_HEADER,
  FORWARDED_HEADER,
  RELAY,
  RUNTIME_DIRECT_REALM,
  SCHEDULER_API_REALM,
  namesSwitchyardRealm,
} from './http.ts';
export {
  RUNTIME_LIMITS,
  metadataSchema,
  metadataProblems,
  weightSchema,
  runtimeInfoSchema,
  runtimeSchema,
  threadRefSchema,
  runtimeStateSchema,
  DRAINING_METADATA_KEY,
  runtimeStateOf,
} from './runtime.ts';
export { RUNTIME_VERSION_MESSAGE, isRuntimeVersion } from './version.ts';
export type { RuntimeInfo, Runtime, ThreadRef, RuntimeState, RuntimeStateName } from './runtime.ts';
export type { MapProblem } from './map.ts';
export { PROTO_KEY_MESSAGE } from './map.ts';
export { runtimeOpSchema, clusterOpSchema, toClusterOp } from './ops.ts';
export type { RuntimeOp, ClusterOp } from './ops.ts';
export { snapshotSchema } from './snapshot.ts';
export { TERM_MAX } from './term.ts';
export type { Snapshot } from './snapshot.ts';
export {
  RULE_OPS,
  ruleSchema,
  VERSION_RULE_KEY,
  loadBalanceSchema,
  LOAD_BALANCE_DEFAULTS,
  scheduleRequestSchema,
  SCHEDULE_SOURCES,
  traceStepSchema,
  unschedulableSchema,
  scheduleDecisionSchema,
  scheduleAnswerFieldsSchema,
  scheduleResponseSchema,
} from './schedule.ts';
export type {
  RuleOp,
  Rule,
  LoadBalance,
  ScheduleRequestInput,
  ScheduleRequest,
  ScheduleSource,
  TraceStep,
  Unschedulable,
  ScheduleDecision,
  ScheduleResponse,
} from './schedule.ts';
export {
  epochInfoSchema,
  listedRuntimeSchema,
  runtimesAnswerSchema,
  runtimesTableSchema,
  apiErrorSchema,
} from './scheduler-api.ts';
export type { EpochInfo, ListedRuntime, RuntimesAnswer, RuntimesTable, ApiError } from './scheduler-api.ts';
export {
  EPOCH_MAX,
  SYNC_FEATURES,
  SYNC_FEATURES_HEADER,
  SYNC_OPS_MAX,
  partSchema,
  syncMessageSchema,
} from './epoch.ts';
export type { Part, SyncMessage, CommitBody } from './epoch.ts';
export {
  SYNC_PART_LIMITS,
  syncPartSchema,
  syncCommitEndSchema,
  syncCollectEndSchema,
  syncFrameSchema,
} from './epoch-parts.ts';
export type { SyncPart, SyncRunEnd, SyncFrame } from './epoch-parts.ts';
export {
  WATCH_EVENTS,
  WATCH_FEATURES,
  WATCH_FEATURES_HEADER,
  WATCH_LIMITS,
  watchSnapshotSchema,
  watchSnapshotPartSchema,
  watchSnapshotEndSchema,
  watchDeltaSchema,
} from './watch.ts';
export type { WatchSnapshot, WatchSnapshotPart, WatchSnapshotEnd, WatchDelta } from './watch.ts';
export { ERROR_CODES, SwitchyardError, jsonRpcError, statusOf } from './errors.ts';
export type { ErrorCode, JsonRpcId, JsonRpcErrorBody, UnsupportedVersionData } from './errors.ts';
export { parseWith } from './validate.ts';
export type { Parsed } from './validate.ts';
