import { runtimeStateOf } from '@switchyard/protocol';
import { table } from './table.ts';

interface EpochInfo {
  replica: string;
  epoch: number | null;
  /** Since the replica last knew its epoch to be the newest; absent from schedulers before it was reported. */
  epochAgeMs?: number | null;
  term: number;
  isLeader: boolean;
  leader: { id: string; url: string } | null;
  counts: { runtimes: number; processes: number; threads: number };
}

interface RuntimeSummary {
  id: string;
  owner: string;
  available: boolean;
  classes: string[];
  idleWeight: Record<string, number>;
  metadata: Record<string, string>;
  processes: number;
  threads: number;
  version: string;
}

/** A scheduler replica to ask, with one of its API tokens when it sets any (scheduler `apiTokens`). */
export interface SchedulerTarget {
  readonly url: string;
  readonly token?: string;
}

/** Why fetch failed, from what its "fetch failed" wraps: the connection's or the TLS handshake's own error. */
function unreachableReason(error: unknown): string {
  const cause = (error as { cause?: { message?: string; code?: string } }).cause;
  const reason = cause?.message ?? (error as Error).message;
  const code = cause?.code ?? '';
  // A certificate error: most likely a private CA this process has not been told to trust.
  if (/CERT|SELF_SIGNED/.test(code)) return `${reason} (trust its CA: NODE_EXTRA_CA_CERTS=<PEM file>)`;
  // Most often no local cluster is up: the default is where `npm start` puts one.
  if (code === 'ECONNREFUSED')
    return `${reason} (nothing listens there: start a cluster with npm start, or pass --scheduler <url>)`;
  return reason;
}

/** A JSON answer with one of the `expected` statuses from the scheduler at `target`; anything else is an error saying so. */
async function getJson<T>(
  target: SchedulerTarget,
  path: string,
  expected: readonly number[],
  init: RequestInit = {},
): Promise<{ status: number; body: T }> {
  const headers = new Headers(init.headers);
  if (target.token !== undefined) headers.set('authorization', `Bearer ${target.token}`);
  let response: Response;
  try {
    response = await fetch(`${target.url}${path}`, { ...init, headers, signal: AbortSignal.timeout(5000) });
  } catch (error) {
    throw new Error(`cannot reach ${new URL(target.url).origin}: ${unreachableReason(error)}`, { cause: error });
  }
  if (response.status === 401) {
    await response.body?.cancel();
    throw new Error(
      `${new URL(target.url).origin} refused ${target.token === undefined ? 'a request without' : 'the'} API token: ` +
        'pass one of its apiTokens with --token, or in SWITCHYARD_API_TOKEN',
    );
  }
  const body: unknown = await response.json().catch(() => undefined);
  if (typeof body !== 'object' || body === null || !expected.includes(response.status)) {
    throw new Error(
      `${target.url} does not answer as a Switchyard scheduler (HTTP ${response.status} to ${path}): ` +
        'pass a scheduler replica or its Service with --scheduler',
    );
  }
  return { status: response.status, body: body as T };
}

/** An epoch not confirmed for longer is called out: the leader's own default for a silent follower (`staleAfterMs`). */
const EPOCH_STALE_MS = 10_000;

/** The epoch line's note on how current the replica's view is, and a warning when no leader reaches it. */
function epochAge(epoch: EpochInfo): { note: string; warning?: string } {
  const ageMs = epoch.epochAgeMs;
  if (typeof ageMs !== 'number') return { note: '' };
  const seconds = Math.round(ageMs / 1000);
  const note = `, in sync ${ageMs < 1000 ? 'now' : `${seconds} s ago`}`;
  if (ageMs <= EPOCH_STALE_MS) return { note };
  return {
    note,
    warning: `warning:  no leader has reached ${epoch.replica} for ${seconds} s: this view may be out of date`,
  };
}

/** `/api/runtimes`: the table and, from schedulers of this release on, everything `/api/epoch` says, read with it. */
type RuntimesAnswer = Partial<EpochInfo> & { epoch: number | null; runtimes: RuntimeSummary[] };

/** Reads of a scheduler of an earlier release before its table and its epoch line are shown though they differ. */
const SEPARATE_READS_MAX = 3;

/**
 * The epoch line and the runtime table, of one epoch. A scheduler answers
 * both in `/api/runtimes`. One of an earlier release answers the table with
 * its epoch number only, and the rest in `/api/epoch`: read apart, a commit
 * between the two reads would pair a table with another epoch's line, so
 * they are read again until their epochs agree (a few times at most).
 */
async function readView(target: SchedulerTarget): Promise<{ epoch: EpochInfo; list: RuntimesAnswer; same: boolean }> {
  let { body: list } = await getJson<RuntimesAnswer>(target, '/api/runtimes', [200]);
  if (typeof list.term === 'number') return { epoch: list as EpochInfo, list, same: true };
  for (let read = 1; ; read++) {
    const { body: epoch } = await getJson<EpochInfo>(target, '/api/epoch', [200]);
    const same = epoch.epoch === list.epoch;
    if (same || read === SEPARATE_READS_MAX) return { epoch, list, same };
    ({ body: list } = await getJson<RuntimesAnswer>(target, '/api/runtimes', [200]));
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
    `leader:   ${epoch.leader ? `${epoch.leader.id} (${epoch.leader.url})` : 'none'}`,
    `term:     ${epoch.term}`,
    `epoch:    ${epoch.epoch ?? 'none yet'}   (as seen by ${epoch.replica}${age.note})`,
    ...(age.warning ? [age.warning] : []),
    ...(same
      ? []
      : [`warning:  epochs kept being committed while this was read: the runtimes below are of epoch ${list.epoch}`]),
    `runtimes: ${epoch.counts.runtimes}   sandboxes: ${epoch.counts.processes}   sessions: ${epoch.counts.threads}`,
    '',
    table(['RUNTIME', 'STATE', 'OWNER', 'CLASSES', 'IDLE WEIGHT', 'SANDBOXES', 'SESSIONS'], rows),
  ].join('\n');
}

interface Explained {
  ok: boolean;
  runtime?: string;
  source?: string;
  epoch: number;
  unschedulable?: { stage: string; code: string; message: string };
  trace: Array<{ stage: string; before: number; after: number; candidates?: string[]; note?: string }>;
  error?: string;
}

/** `switchyard explain`: the pipeline trace of one request on the current epoch (a dry run). */
export async function explain(
  target: SchedulerTarget,
  request: { class: string; processId: string; threadId?: string },
): Promise<{ text: string; ok: boolean }> {
  // 200 placed, 503 unschedulable (or no epoch yet), 400 a request the scheduler refused.
  const { status: code, body } = await getJson<Explained>(target, '/api/schedule', [200, 400, 503], {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...request, explain: true }),
  });
  if (code === 400) return { text: `bad request: ${body.error}`, ok: false };
  // Not a trace: e.g. a replica with no epoch yet (503 not_ready).
  if (!Array.isArray(body.trace)) throw new Error(`scheduler answered ${code}: ${body.error ?? 'no trace'}`);
  const rows = body.trace.map((t) => [
    t.stage,
    String(t.before),
    String(t.after),
    (t.candidates ?? []).join(',') || '-',
    t.note ?? '',
  ]);
  const verdict = body.ok
    ? `→ ${body.runtime} (source: ${body.source}, epoch ${body.epoch})`
    : `→ unschedulable at ${stageAndMessage(body.unschedulable)} [${body.unschedulable?.code}]`;
  return { text: [table(['STAGE', 'IN', 'OUT', 'CANDIDATES', 'NOTE'], rows), '', verdict].join('\n'), ok: body.ok };
}

/** `Stage: message`, where messages that already name their stage are not prefixed twice. */
function stageAndMessage(reason: { stage: string; message: string } | undefined): string {
  if (!reason) return 'an unknown stage';
  return reason.message.startsWith(`${reason.stage}: `) ? reason.message : `${reason.stage}: ${reason.message}`;
}
