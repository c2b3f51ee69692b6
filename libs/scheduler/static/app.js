// The live page of a scheduler replica: renders each `state` event of
// `ui/events`. Plain browser script, no build step, no external URL. Text is
// set with textContent only, so runtime-provided strings cannot inject markup.
/* global document, EventSource, window */
'use strict';

const POINTS_MAX = 120; // two minutes at one state per second
const EPOCHS_MAX = 12;
const RUNTIMES_TRACKED_MAX = 1000;
const SVG_NS = 'http://www.w3.org/2000/svg';
const SPARK_WIDTH = 160;
const SPARK_HEIGHT = 28;
/** An epoch not confirmed for longer is flagged: the leader's own default for a silent follower (`staleAfterMs`). */
const EPOCH_STALE_MS = 10_000;
/** Delays before opening a refused state stream again, ms; the last repeats. */
const RETRY_MS = [2000, 5000, 10_000, 30_000];

/** runtime id → [{ idle, busy }], oldest first, at most POINTS_MAX. */
const history = new Map();
/** Recent epochs, newest first: { epoch, term, at }. */
const epochs = [];

const byId = (id) => document.getElementById(id);

function setText(id, value) {
  const el = byId(id);
  const text = String(value);
  if (el.textContent !== text) el.textContent = text;
}

function sumWeight(weight) {
  let total = 0;
  for (const value of Object.values(weight)) total += value;
  return total;
}

function formatWeight(weight) {
  const parts = Object.entries(weight).map(([k, v]) => `${k}=${v}`);
  return parts.length ? parts.join(', ') : '–';
}

function record(state) {
  const seen = new Set();
  for (const r of state.runtimes) {
    seen.add(r.id);
    let points = history.get(r.id);
    if (!points) {
      if (history.size >= RUNTIMES_TRACKED_MAX) continue;
      points = [];
      history.set(r.id, points);
    }
    points.push({ idle: sumWeight(r.idleWeight), busy: r.processes });
    if (points.length > POINTS_MAX) points.shift();
  }
  for (const id of history.keys()) if (!seen.has(id)) history.delete(id);
  if (state.epoch !== null && epochs[0]?.epoch !== state.epoch) {
    epochs.unshift({ epoch: state.epoch, term: state.term, at: new Date(state.timeMs) });
    if (epochs.length > EPOCHS_MAX) epochs.pop();
  }
}

function polyline(points, key, max, cls) {
  const line = document.createElementNS(SVG_NS, 'polyline');
  const step = SPARK_WIDTH / (POINTS_MAX - 1);
  const offset = SPARK_WIDTH - step * (points.length - 1);
  const coords = points.map((p, i) => {
    const y = SPARK_HEIGHT - 2 - (max > 0 ? (p[key] / max) * (SPARK_HEIGHT - 4) : 0);
    return `${(offset + i * step).toFixed(1)},${y.toFixed(1)}`;
  });
  line.setAttribute('points', coords.join(' '));
  line.setAttribute('fill', 'none');
  line.setAttribute('stroke-width', '1.5');
  line.setAttribute('class', cls);
  return line;
}

function sparkline(id) {
  const points = history.get(id) ?? [];
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('class', 'spark');
  svg.setAttribute('width', String(SPARK_WIDTH));
  svg.setAttribute('height', String(SPARK_HEIGHT));
  svg.setAttribute('viewBox', `0 0 ${SPARK_WIDTH} ${SPARK_HEIGHT}`);
  let max = 0;
  for (const p of points) max = Math.max(max, p.idle, p.busy);
  svg.append(polyline(points, 'idle', max, 'idle'), polyline(points, 'busy', max, 'busy'));
  const title = document.createElementNS(SVG_NS, 'title');
  const last = points.at(-1);
  title.textContent = last ? `idle weight ${last.idle}, sandboxes ${last.busy}` : 'no data yet';
  svg.append(title);
  return svg;
}

function cell(text, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function renderRuntimes(state) {
  const rows = state.runtimes.map((r) => {
    const tr = document.createElement('tr');
    tr.dataset.runtime = r.id;
    const spark = document.createElement('td');
    spark.append(sparkline(r.id));
    tr.append(
      cell(r.id, 'id'),
      cell(r.state, r.state),
      cell(r.owner),
      cell(r.classes.join(', ')),
      cell(r.version),
      cell(formatWeight(r.idleWeight)),
      cell(String(r.processes)),
      cell(String(r.threads)),
      spark,
    );
    return tr;
  });
  byId('runtimes').replaceChildren(...rows);
  byId('empty').hidden = rows.length > 0;
}

function renderEpochs() {
  const items = epochs.map((e) => {
    const li = document.createElement('li');
    li.textContent = `#${e.epoch} · term ${e.term} · ${e.at.toLocaleTimeString()}`;
    return li;
  });
  byId('epochs').replaceChildren(...items);
}

/** How long ago the epoch was last known to be the newest; a replica no leader reaches keeps showing its last one. */
function renderEpochAge(ageMs) {
  const el = byId('epoch-age');
  const stale = ageMs !== null && ageMs > EPOCH_STALE_MS;
  if (ageMs === null) setText('epoch-age', '–');
  else if (stale) setText('epoch-age', `${Math.round(ageMs / 1000)} s ago: no leader reaches this replica`);
  else setText('epoch-age', ageMs < 1000 ? 'now' : `${Math.round(ageMs / 1000)} s ago`);
  el.className = stale ? 'stale' : '';
}

function render(state) {
  record(state);
  setText('replica', state.replica);
  setText('role', state.isLeader ? 'leader' : 'follower');
  setText('leader', state.leader ? state.leader.id : 'none');
  setText('term', state.term);
  setText('epoch', state.epoch === null ? 'none yet' : state.epoch);
  renderEpochAge(state.epochAgeMs ?? null);
  setText('count-runtimes', state.counts.runtimes);
  setText('count-processes', state.counts.processes);
  setText('count-threads', state.counts.threads);
  renderEpochs();
  renderRuntimes(state);
  document.title = `Switchyard · ${state.replica} · epoch ${state.epoch ?? '–'}`;
}

/** The open state stream, and the timer of the next attempt after a refusal. */
const stream = { events: undefined, retry: undefined };

/**
 * Opens the state stream. EventSource retries a dropped connection by itself,
 * but an answer other than a 200 event stream (503 when every viewer slot is
 * taken, 401 after a token change, a proxy's 502 while the replica restarts)
 * closes it for good: the page then opens a new one, backing off, so it never
 * shows a dead stream as reconnecting.
 */
function connect(pill, attempt = 0) {
  const events = new EventSource('ui/events');
  stream.events = events;
  events.addEventListener('open', () => {
    attempt = 0;
    pill.textContent = 'live';
    pill.className = 'pill';
  });
  events.addEventListener('error', () => {
    pill.className = 'pill off';
    if (events.readyState !== EventSource.CLOSED) {
      pill.textContent = 'reconnecting…';
      return;
    }
    const delayMs = RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)];
    pill.textContent = `refused; retrying in ${delayMs / 1000} s`;
    stream.retry = window.setTimeout(() => connect(pill, attempt + 1), delayMs);
  });
  events.addEventListener('state', (event) => render(JSON.parse(event.data)));
}

/**
 * Closes the state stream as the page is hidden: a page kept in the
 * back/forward cache must not hold one of the replica's viewer slots. The
 * pill says so at once, so a page shown again never claims to be live
 * before its new stream is open.
 */
function disconnect() {
  stream.events?.close();
  stream.events = undefined;
  window.clearTimeout(stream.retry);
  const pill = byId('connection');
  pill.textContent = 'connecting…';
  pill.className = 'pill off';
}

/** Back from the back/forward cache (no new load): the stream closed on 'pagehide' opens again. */
function resume(event) {
  if (event.persisted) connect(byId('connection'));
}

document.addEventListener('DOMContentLoaded', () => connect(byId('connection')));
window.addEventListener('pagehide', disconnect);
window.addEventListener('pageshow', resume);
