import { z } from 'zod';
import { RUNTIME_INSTANCE_PATTERN, identityValueSchema } from './identity.ts';
import { listOf } from './list.ts';
import { mapOf, mapProblems } from './map.ts';
import type { MapProblem, MapRules } from './map.ts';
import { RUNTIME_VERSION_MESSAGE, isRuntimeVersion } from './version.ts';

/** Limits on self-described runtime fields; a runtime past them is refused. */
export const RUNTIME_LIMITS = {
  classesMax: 64,
  metadataEntriesMax: 64,
  metadataValueLengthMax: 256,
  weightDimensionsMax: 16,
  weightValueMax: 1e12,
  versionLengthMax: 64,
  addressLengthMax: 256,
  /** Processes one runtime may report (in its `/watch` snapshot and in the cluster state). */
  processesMax: 1_000_000,
  /** Threads one runtime may report. */
  threadsMax: 10_000_000,
} as const;

const KEY_PATTERN = /^[A-Za-z0-9._/-]{1,63}$/;
const KEY_MESSAGE = 'must be 1-63 characters from [A-Za-z0-9._/-]';

const METADATA_RULES: MapRules = {
  entriesMax: RUNTIME_LIMITS.metadataEntriesMax,
  entries: 'entries',
  keyPattern: KEY_PATTERN,
  keyMessage: KEY_MESSAGE,
  valueProblem: (value) => {
    if (typeof value !== 'string') return 'expected a string';
    const max = RUNTIME_LIMITS.metadataValueLengthMax;
    return value.length > max ? `at most ${max} characters` : undefined;
  },
};

const WEIGHT_RULES: MapRules = {
  entriesMax: RUNTIME_LIMITS.weightDimensionsMax,
  entries: 'dimensions',
  keyPattern: KEY_PATTERN,
  keyMessage: KEY_MESSAGE,
  valueProblem: (value) => {
    if (typeof value !== 'number' || !Number.isFinite(value)) return 'expected a finite number';
    const max = RUNTIME_LIMITS.weightValueMax;
    return value < 0 || value > max ? `must be between 0 and ${max}` : undefined;
  },
};

/** Labels (e.g. `{zone: 'eu-1'}`) that affinity rules match; refused at the first problem (see `mapOf`). */
export const metadataSchema = mapOf<string>(METADATA_RULES);

/** Every problem of a metadata map, for callers that list them all (config); the wire refuses at the first. */
export function metadataProblems(value: unknown): MapProblem[] {
  return mapProblems(value, METADATA_RULES);
}

/** Idle weight per dimension (e.g. `{sandboxes: 12}`): how much more work a runtime takes. */
export const weightSchema = mapOf<number>(WEIGHT_RULES);

/**
 * What a runtime says about itself when it connects (`X-Runtime-Info`,
 * base64url JSON). `limits` is its capacity per weight dimension.
 */
export const runtimeInfoSchema = z.strictObject({
  id: identityValueSchema,
  classes: z.array(identityValueSchema).min(1).max(RUNTIME_LIMITS.classesMax),
  metadata: metadataSchema.default({}),
  // Only here, where a runtime joins: the cluster state (runtimeSchema) also carries what replicas of
  // older releases admitted, and refusing that would fail their epoch sync.
  version: z
    .string()
    .max(RUNTIME_LIMITS.versionLengthMax)
    .refine(isRuntimeVersion, RUNTIME_VERSION_MESSAGE)
    .default('0.0.0'),
  limits: weightSchema.default({}),
  /** Optional address a gateway may dial directly (`http://host:port`), bypassing the tunnel. */
  address: z.string().max(RUNTIME_LIMITS.addressLengthMax).optional(),
});
export type RuntimeInfo = z.infer<typeof runtimeInfoSchema>;

/** A runtime as the scheduler sees it. */
export const runtimeSchema = z.strictObject({
  id: identityValueSchema,
  classes: z.array(identityValueSchema).max(RUNTIME_LIMITS.classesMax),
  metadata: metadataSchema,
  version: z.string().max(RUNTIME_LIMITS.versionLengthMax),
  idleWeight: weightSchema,
  available: z.boolean(),
  /** Scheduler replica that holds this runtime's tunnel. */
  owner: identityValueSchema,
  /** Base URL of the owner replica (`http://host:port`), so any replica or gateway can reach the tunnel in one hop. */
  ownerUrl: z.string().max(RUNTIME_LIMITS.addressLengthMax).optional(),
  /**
   * Connection generation, increasing per reconnect. When two replicas
   * report the same runtime, the higher generation wins (ties: owner id).
   */
  generation: z.number().int().min(0),
  address: z.string().max(RUNTIME_LIMITS.addressLengthMax).optional(),
  /**
   * Fingerprint of the join token the runtime's tunnel came with (16 base64url characters of a
   * domain-separated hash, never the token): another replica refuses the id to a connect with
   * another token while this entry is live. Absent from replicas of earlier releases (not checked
   * then), and only sent to peers that read it (`SYNC_FEATURES.tokenFingerprint`): they validate
   * strictly. Replicas leave it out of their API answers.
   */
  tokenFingerprint: z
    .string()
    .regex(/^[A-Za-z0-9_-]{16,64}$/)
    .optional(),
  /**
   * The instance id the runtime process dialled with (`RUNTIME_INSTANCE_HEADER`): another replica refuses
   * the id to a connect naming another instance while this entry is live. Absent for a runtime that named
   * none, and from replicas of earlier releases (not checked then); only sent to peers that read it
   * (`SYNC_FEATURES.instance`): they validate strictly. Replicas leave it out of their API answers.
   */
  instance: z.string().regex(RUNTIME_INSTANCE_PATTERN).optional(),
});
export type Runtime = z.infer<typeof runtimeSchema>;

/**
 * Metadata key a runtime reports, with value `"true"`, while it drains on its
 * way out: it then offers no idle weight, like a full runtime, and this key
 * tells the two apart. Reserved: a runtime's own metadata under it is dropped.
 */
export const DRAINING_METADATA_KEY = 'switchyard/draining';

/**
 * A runtime's state as operators see it: `available` takes new sandboxes as
 * its idle weight allows, `draining` takes none while its sessions go on,
 * `unavailable` is not reachable now.
 */
export type RuntimeStateName = 'available' | 'draining' | 'unavailable';

export function runtimeStateOf(runtime: Pick<Runtime, 'available' | 'metadata'>): RuntimeStateName {
  if (!runtime.available) return 'unavailable';
  return runtime.metadata[DRAINING_METADATA_KEY] === 'true' ? 'draining' : 'available';
}

/** A runtime together with what it hosts: processes and `process/thread` pairs. */
export const threadRefSchema = z.strictObject({ process: identityValueSchema, thread: identityValueSchema });
export type ThreadRef = z.infer<typeof threadRefSchema>;

export const runtimeStateSchema = z.strictObject({
  runtime: runtimeSchema,
  processes: listOf(identityValueSchema, RUNTIME_LIMITS.processesMax),
  threads: listOf(threadRefSchema, RUNTIME_LIMITS.threadsMax),
});
export type RuntimeState = z.infer<typeof runtimeStateSchema>;
