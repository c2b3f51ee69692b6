/**
 * What `status` and `explain` read from a scheduler, and checks that an
 * answer has that shape. Whatever the URL answers (a replica of another
 * release, a proxy, something else) is checked before it is printed: read
 * unchecked, a missing field came out as "Cannot read properties of
 * undefined", which says nothing about the URL.
 */

export interface EpochInfo {
  replica: string;
  epoch: number | null;
  /** Since the replica last knew its epoch to be the newest; absent from schedulers before it was reported. */
  epochAgeMs?: number | null;
  term: number;
  leader: { id: string; url: string } | null;
  counts: { runtimes: number; processes: number; threads: number };
}

export interface RuntimeSummary {
  id: string;
  owner: string;
  available: boolean;
  classes: string[];
  idleWeight: Record<string, number>;
  metadata: Record<string, string>;
  processes: number;
  threads: number;
}

/** `/api/runtimes`: the table and, from schedulers of this release on, everything `/api/epoch` says, read with it. */
export type RuntimesAnswer = Partial<EpochInfo> & { epoch: number | null; runtimes: RuntimeSummary[] };

export interface Explained {
  /** With a trace: placed (then `runtime`, `source` and `epoch` are there) or not. */
  ok?: boolean;
  runtime?: string;
  source?: string;
  epoch?: number;
  unschedulable?: { stage: string; code: string; message: string };
  trace?: Array<{ stage: string; before: number; after: number; candidates?: string[]; note?: string }>;
  error?: string;
}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const isString = (v: unknown): v is string => typeof v === 'string';
const isNumber = (v: unknown): v is number => typeof v === 'number';
const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every(isString);
const isRecordOf = (v: unknown, value: (x: unknown) => boolean): boolean =>
  isObject(v) && Object.values(v).every(value);
const optional = (v: unknown, check: (x: unknown) => boolean): boolean => v === undefined || check(v);
const isEpochNumber = (v: unknown): boolean => v === null || isNumber(v);

function isRuntimeSummary(v: unknown): v is RuntimeSummary {
  return (
    isObject(v) &&
    isString(v.id) &&
    isString(v.owner) &&
    typeof v.available === 'boolean' &&
    isStrings(v.classes) &&
    isRecordOf(v.idleWeight, isNumber) &&
    isRecordOf(v.metadata, isString) &&
    isNumber(v.processes) &&
    isNumber(v.threads)
  );
}

/** The table of `/api/runtimes`, whichever release answered. */
export function isRuntimesAnswer(v: unknown): v is RuntimesAnswer {
  return isObject(v) && isEpochNumber(v.epoch) && Array.isArray(v.runtimes) && v.runtimes.every(isRuntimeSummary);
}

/** The epoch line: all of `/api/epoch`, or of `/api/runtimes` from a scheduler of this release. */
export function isEpochInfo(v: unknown): v is EpochInfo {
  return (
    isObject(v) &&
    isString(v.replica) &&
    isEpochNumber(v.epoch) &&
    optional(v.epochAgeMs, isEpochNumber) &&
    isNumber(v.term) &&
    (v.leader === null || (isObject(v.leader) && isString(v.leader.id) && isString(v.leader.url))) &&
    isObject(v.counts) &&
    isNumber(v.counts.runtimes) &&
    isNumber(v.counts.processes) &&
    isNumber(v.counts.threads)
  );
}

function isStage(v: unknown): boolean {
  return (
    isObject(v) &&
    isString(v.stage) &&
    isNumber(v.before) &&
    isNumber(v.after) &&
    optional(v.candidates, isStrings) &&
    optional(v.note, isString)
  );
}

/** A `/api/schedule` answer: a decision with its trace, or an error. */
export function isExplained(v: unknown): v is Explained {
  if (!isObject(v)) return false;
  if (v.trace === undefined) return isString(v.error);
  const reason = v.unschedulable;
  const placed = v.ok === true && isString(v.runtime) && isString(v.source) && isNumber(v.epoch);
  return (
    (placed || v.ok === false) &&
    Array.isArray(v.trace) &&
    v.trace.every(isStage) &&
    optional(reason, (r) => isObject(r) && isString(r.stage) && isString(r.code) && isString(r.message))
  );
}
