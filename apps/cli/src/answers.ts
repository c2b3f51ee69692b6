/**
 * What `status` and `explain` read from a scheduler, parsed with the
 * scheduler's own answer schemas (`@switchyard/protocol`). Whatever the URL
 * answers (a replica of another release, a proxy, something else) is parsed
 * before it is printed: read unchecked, a missing field came out as "Cannot
 * read properties of undefined", which says nothing about the URL. What the
 * commands do not show an answer may lack: it is no reason to refuse one.
 */
import {
  apiErrorSchema,
  epochInfoSchema,
  parseWith,
  runtimesTableSchema,
  scheduleAnswerFieldsSchema,
  scheduleDecisionSchema,
  type Parsed,
  type RuntimesTable,
} from '@switchyard/protocol';

/** One problem is enough to tell an operator the URL is no scheduler; a list of them is noise. */
const ISSUES_SHOWN = 1;

/** The epoch line of `status`: all of `/api/epoch` but what it does not show. */
const epochLineSchema = epochInfoSchema.omit({ isLeader: true, localRuntimes: true });
export type EpochLine = ReturnType<typeof epochLineSchema.parse>;

/** `/api/runtimes`: the table, and the epoch line where the scheduler's release answers it there too. */
export interface RuntimesRead {
  readonly table: RuntimesTable;
  readonly line?: EpochLine;
}

export function readRuntimes(body: unknown): Parsed<RuntimesRead> {
  const table = parseWith(runtimesTableSchema, body, ISSUES_SHOWN);
  if (!table.ok) return table;
  // An earlier release answers the table alone; this one with the whole epoch line beside it.
  if ((body as { term?: unknown }).term === undefined) return { ok: true, value: { table: table.value } };
  const line = readEpochLine(body);
  return line.ok ? { ok: true, value: { table: table.value, line: line.value } } : line;
}

/** `/api/epoch`, as the epoch line of `status`. */
export function readEpochLine(body: unknown): Parsed<EpochLine> {
  return parseWith(epochLineSchema, body, ISSUES_SHOWN);
}

/** A decision as `explain` shows it: with its trace and epoch (the term and where to send traffic it does not show). */
const explainedSchema = scheduleDecisionSchema.and(scheduleAnswerFieldsSchema.pick({ epoch: true }));
export type Explained = ReturnType<typeof explainedSchema.parse>;
export type ExplainAnswer = { readonly decision: Explained } | { readonly error: string };

/** A `POST /api/schedule` answer: a decision with its trace, or an error (a refused request, no epoch yet). */
export function readExplained(body: unknown): Parsed<ExplainAnswer> {
  if (typeof body === 'object' && body !== null && 'trace' in body) {
    const decision = parseWith(explainedSchema, body, ISSUES_SHOWN);
    return decision.ok ? { ok: true, value: { decision: decision.value } } : decision;
  }
  const error = parseWith(apiErrorSchema, body, ISSUES_SHOWN);
  return error.ok ? { ok: true, value: { error: error.value.error } } : error;
}
