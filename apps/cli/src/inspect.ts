import { runtimeStateOf, type Parsed, type RuntimesTable } from '@switchyard/protocol';
import { readEpochLine, readExplained, readRuntimes, type EpochLine } from './answers.ts';
import { httpRequest, type HttpInit } from './http-request.ts';
import { printable } from './log-lines.ts';
import { table } from './table.ts';

/** A scheduler replica to ask, with one of its API tokens when it sets any (scheduler `apiTokens`). */
export interface SchedulerTarget {
  readonly url: string;
  readonly token?: string;
}

/** What a refused connection most often means to someone running the command by hand: no local cluster is up. */
const REFUSED_HINT = 'nothing listens there: start a cluster with npm start, or pass --scheduler <url>';

/**
 * Why an exchange failed, from the connection's or the TLS handshake's own
 * error (or a timeout). `refusedHint` explains a refused connection.
 */
export function unreachableReason(error: unknown, refusedHint = REFUSED_HINT): string {
  const { message: reason = String(error), code = '' } = (error ?? {}) as { message?: string; code?: string };
  // A certificate error: most likely a private CA this process has not been told to trust.
  if (/CERT|SELF_SIGNED/.test(code)) return `${reason} (trust its CA: NODE_EXTRA_CA_CERTS=<PEM file>)`;
  if (code === 'ECONNREFUSED') return `${reason} (${refusedHint})`;
  return reason;
}

/**
 * A JSON answer that `read` parses, with one of the `expected` statuses,
 * from the scheduler at `target`; anything else is an error saying so.
 */
export async function getJson<T>(
  target: SchedulerTarget,
  path: string,
  expected: readonly number[],
  read: (body: unknown) => Parsed<T>,
  init: HttpInit = {},
  refusedHint = REFUSED_HINT,
): Promise<{ status: number; body: T }> {
  const headers = new Headers(init.headers);
  if (target.token !== undefined) headers.set('authorization', `Bearer ${target.token}`);
  const origin = new URL(target.url).origin;
  let response: Response;
  try {
    response = await httpRequest(`${target.url}${path}`, { ...init, headers, signal: AbortSignal.timeout(5000) });
  } catch (error) {
    throw new Error(`cannot reach ${origin}: ${unreachableReason(error, refusedHint)}`, { cause: error });
  }
  if (response.status === 401) {
    await response.body?.cancel();
    throw new Error(
      `${origin} refused ${target.token === undefined ? 'a request without' : 'the'} API token: ` +
        'pass one of its apiTokens with --token, or in SWITCHYARD_API_TOKEN',
    );
  }
  let body: unknown;
  try {
    body = await response.json();
  } catch (error) {
    // A body that stalls or is cut off (the timeout above covers it too) is not one that is no JSON.
    if (!(error instanceof SyntaxError)) {
      throw new Error(`${target.url} broke off its answer to ${path}: ${unreachableReason(error)}`, {
        cause: error,
      });
    }
    if (expected.includes(response.status)) throw notScheduler(target, response.status, path, 'not JSON');
  }
  if (!expected.includes(response.status)) throw notScheduler(target, response.status, path);
  const parsed = read(body);
  if (!parsed.ok) throw notScheduler(target, response.status, path, parsed.error);
  return { status: response.status, body: parsed.value };
}

/** Characters of a parse problem shown: it names a path that a hostile answer may make as long as it likes. */
const PROBLEM_CHARS_MAX = 200;

function notScheduler(target: SchedulerTarget, status: number, path: string, problem?: string): Error {
  const shown =
    problem === undefined
      ? ''
      : `: ${printable(problem.length > PROBLEM_CHARS_MAX ? `${problem.slice(0, PROBLEM_CHARS_MAX)}…` : problem)}`;
  return new Error(
    `${target.url} does not answer as a Switchyard scheduler (HTTP ${status} to ${path}${shown}): ` +
      'pass a scheduler replica or its Service with --scheduler',
  );
}

/** An epoch not confirmed for longer is called out: the leader's own default for a silent follower (`staleAfterMs`). */
export const EPOCH_STALE_MS = 10_000;

/** The epoch line's note on how current the replica's view is, and a warning when no leader reaches it. */
function epochAge(epoch: EpochLine): { note: string; warning?: string } {
  const ageMs = epoch.epochAgeMs;
  if (typeof ageMs !== 'number') return { note: '' };
  const seconds = Math.round(ageMs / 1000);
  const note = `, in sync ${ageMs < 1000 ? 'now' : `${seconds} s ago`}`;
  if (ageMs <= EPOCH_STALE_MS) return { note };
  return {
    note,
    warning: `warning:  no leader has reached ${printable(epoch.replica)} for ${seconds} s: this view may be out of date`,
  };
}

/** Reads of a scheduler of an earlier release before its table and its epoch line are shown though they differ. */
const SEPARATE_READS_MAX = 3;

/**
 * The epoch line and the runtime table, of one epoch. A scheduler answers
 * both in `/api/runtimes`. One of an earlier release answers the table with
 * its epoch number only, and the rest in `/api/epoch`: read apart, a commit
 * between the two reads would pair a table with another epoch's line, so
 * they are read again until their epochs agree (a few times at most).
 */
async function readView(target: SchedulerTarget): Promise<{ epoch: EpochLine; list: RuntimesTable; same: boolean }> {
  const first = await getJson(target, '/api/runtimes', [200], readRuntimes);
  // From a scheduler of this release, the epoch line comes with the table.
  if (first.body.line) return { epoch: first.body.line, list: first.body.table, same: true };
  let list = first.body.table;
  for (let read = 1; ; read++) {
    const { body: epoch } = await getJson(target, '/api/epoch', [200], readEpochLine);
    const same = epoch.epoch === list.epoch;
    if (same || read === SEPARATE_READS_MAX) return { epoch, list, same };
    ({ table: list } = (await getJson(target, '/api/runtimes', [200], readRuntimes)).body);
  }
}

/** `switchyard status`: leader, term, epoch and the runtimes of the latest epoch. */
export async function status(target: SchedulerTarget): Promise<string> {
  const { epoch, list, same } = await readView(target);
  const weight = (w: Record<string, number>): string =>
    Object.entries(w)
      .map(([k, v]) => `${k}=${v}`)
      .join(',') || '-';
  const rows = list.runtimes.map((r) => [
    r.id,
    runtimeStateOf(r),
    r.owner,
    r.classes.join(','),
    weight(r.idleWeight),
    String(r.processes),
    String(r.threads),
  ]);
  const age = epochAge(epoch);
  return [
    `leader:   ${epoch.leader ? printable(`${epoch.leader.id} (${epoch.leader.url})`) : 'none'}`,
    `term:     ${epoch.term}`,
    `epoch:    ${epoch.epoch ?? 'none yet'}   (as seen by ${printable(epoch.replica)}${age.note})`,
    ...(age.warning ? [age.warning] : []),
    ...(same
      ? []
      : [`warning:  epochs kept being committed while this was read: the runtimes below are of epoch ${list.epoch}`]),
    `runtimes: ${epoch.counts.runtimes}   sandboxes: ${epoch.counts.processes}   sessions: ${epoch.counts.threads}`,
    '',
    table(['RUNTIME', 'STATE', 'OWNER', 'CLASSES', 'IDLE WEIGHT', 'SANDBOXES', 'SESSIONS'], rows.map(cells)),
  ].join('\n');
}

/** `switchyard explain`: the pipeline trace of one request on the current epoch (a dry run). */
export async function explain(
  target: SchedulerTarget,
  request: { class: string; processId: string; threadId?: string },
): Promise<{ text: string; ok: boolean }> {
  // 200 placed, 503 unschedulable (or no epoch yet), 400 a request the scheduler refused.
  const { status: code, body: answer } = await getJson(target, '/api/schedule', [200, 400, 503], readExplained, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...request, explain: true }),
  });
  if (code === 400) {
    return { text: printable(`bad request: ${'error' in answer ? answer.error : 'no reason given'}`), ok: false };
  }
  // Not a trace: e.g. a replica with no epoch yet (503 not_ready).
  if ('error' in answer) throw new Error(printable(`scheduler answered ${code}: ${answer.error}`));
  const body = answer.decision;
  const rows = body.trace.map((t) => [
    t.stage,
    String(t.before),
    String(t.after),
    (t.candidates ?? []).join(',') || '-',
    t.note ?? '',
  ]);
  const verdict = body.ok
    ? `→ ${body.runtime} (source: ${body.source}, epoch ${body.epoch})`
    : `→ unschedulable at ${stageAndMessage(body.unschedulable)} [${body.unschedulable.code}]`;
  const trace = table(['STAGE', 'IN', 'OUT', 'CANDIDATES', 'NOTE'], rows.map(cells));
  return { text: `${trace}\n\n${printable(verdict)}`, ok: body.ok };
}

/** `Stage: message`, where messages that already name their stage are not prefixed twice. */
function stageAndMessage(reason: { stage: string; message: string }): string {
  return reason.message.startsWith(`${reason.stage}: `) ? reason.message : `${reason.stage}: ${reason.message}`;
}

/**
 * A row with every cell fit for a terminal. Ids come from whatever answered the
 * URL: unescaped, a newline in one forged a row, an escape sequence steered the
 * terminal (retitled it, cleared it).
 */
function cells(row: readonly string[]): string[] {
  return row.map(printable);
}
