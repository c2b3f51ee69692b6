/**
 * A scheduler replica (design brief §6): election, epoch sync, runtime
 * tunnels, scheduling from the latest epoch and proxying into tunnels.
 */
export { startSchedulerReplica } from './replica.ts';
export type { SchedulerReplica } from './replica.ts';
export type { SchedulerReplicaOptions, ReplicaLogger } from './options.ts';
export { ClusterView } from './cluster-view.ts';
export type { ClusterViewOptions } from './cluster-view.ts';
export { parseScheduleRequest } from './schedule-request.ts';
export { REDIAL_WAIT_MS } from './redial-waits.ts';
export { RUNTIME_STATE_DEFAULTS } from './runtime-state-limits.ts';
// For the app's config: what a join token line may be (`<token> [<runtime id pattern>]`), and which of them stand in
// as peer tokens where none are given.
export { joinTokenLineProblem, unscopedJoinTokens } from '@switchyard/tunnel';
