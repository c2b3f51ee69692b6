import type { RuntimeState, SyncMessage } from '@switchyard/protocol';

/**
 * Bytes of a frame besides its runtimes, with room to spare: a part's type, term, epoch and number take under
 * 100, and a whole message of one part under 300 (a collect naming a replica of 128 characters), so that one
 * goes within the budget too.
 */
const FRAME_OVERHEAD_BYTES = 512;
/** Bytes of an entry besides its runtime and list items (`{"runtime":,"processes":[],"threads":[]},`: 40). */
const ENTRY_OVERHEAD_BYTES = 48;

// A snapshot commit goes to every follower that needs it as the same object: its frames are built once.
// Weak keys: entries go when the message does.
const built = new WeakMap<SyncMessage, { readonly partBytes: number; readonly frames: string[] | undefined }>();

/**
 * The frames that carry `msg` as a run of parts, each of at most about `partBytes` (see `syncPartSchema`), or
 * undefined when it fits one part (it then goes whole) or is not a snapshot commit or full collect. A frame
 * exceeds `partBytes` only where one runtime's fields and one of its processes or threads do. Built once per
 * message object and size.
 */
export function partFrames(msg: SyncMessage, partBytes: number): string[] | undefined {
  const run = runOf(msg);
  if (!run) return undefined;
  const memo = built.get(msg);
  if (memo?.partBytes === partBytes) return memo.frames;
  const frames = framesOf(run, partBytes);
  built.set(msg, { partBytes, frames });
  return frames;
}

interface Run {
  readonly term: number;
  readonly epoch: number;
  readonly runtimes: readonly RuntimeState[];
  /** The closing frame, but for its number of parts. */
  readonly end: object;
}

/** What a snapshot commit or full collect sends as a run; undefined for any other message. */
function runOf(msg: SyncMessage): Run | undefined {
  if (msg.type === 'commit' && msg.body.kind === 'snapshot') {
    const { term, epoch } = msg;
    return { term, epoch, runtimes: msg.body.snapshot.runtimes, end: { type: 'commit-end', term, epoch } };
  }
  if (msg.type === 'collect' && msg.part.kind === 'full') {
    const { term, epoch, replica, version } = msg;
    return { term, epoch, runtimes: msg.part.runtimes, end: { type: 'collect-end', term, epoch, replica, version } };
  }
  return undefined;
}

function framesOf({ term, epoch, runtimes, end }: Run, partBytes: number): string[] | undefined {
  const frames: string[] = [];
  for (const part of slices(runtimes, partBytes)) {
    // A message of one part goes whole, as to a peer of an earlier release.
    if (frames.length === 0 && part.last) return undefined;
    frames.push(JSON.stringify({ type: 'part', term, epoch, part: frames.length, runtimes: part.runtimes }));
  }
  if (frames.length === 0) return undefined;
  frames.push(JSON.stringify({ ...end, parts: frames.length }));
  return frames;
}

/**
 * Cuts `states` into the runtimes of parts of at most `budget` bytes, a runtime's processes then threads
 * across as many parts as they take. Sizes are counted, not encoded: identity values are ASCII with nothing
 * to escape (their schema admits no other), so a process takes its length and 3 bytes (quotes, comma), a
 * thread its two lengths and 27; a runtime's fields are encoded once.
 */
function* slices(
  states: readonly RuntimeState[],
  budget: number,
): Generator<{ readonly runtimes: RuntimeState[]; readonly last: boolean }> {
  let runtimes: RuntimeState[] = [];
  let size = FRAME_OVERHEAD_BYTES;
  for (const state of states) {
    const head = Buffer.byteLength(JSON.stringify(state.runtime)) + ENTRY_OVERHEAD_BYTES;
    if (runtimes.length > 0 && size + head > budget) {
      yield { runtimes, last: false };
      [runtimes, size] = [[], FRAME_OVERHEAD_BYTES];
    }
    size += head;
    const { processes, threads } = state;
    const items = processes.length + threads.length;
    let from = 0; // where this runtime's entry in the current part starts, processes then threads
    for (let i = 0; i < items; i++) {
      const thread = i < processes.length ? undefined : threads[i - processes.length]!;
      const bytes = thread ? thread.process.length + thread.thread.length + 27 : processes[i]!.length + 3;
      // Something else in the part: the next one takes this item, and a continuing entry of the runtime.
      if (size + bytes > budget && (runtimes.length > 0 || i > from)) {
        runtimes.push(entry(state, from, i));
        yield { runtimes, last: false };
        [runtimes, size, from] = [[], FRAME_OVERHEAD_BYTES + head, i];
      }
      size += bytes;
    }
    runtimes.push(entry(state, from, items));
  }
  if (runtimes.length > 0) yield { runtimes, last: true };
}

/** The items `from` to `to` (processes, then threads) of `state`, under its runtime. */
function entry(state: RuntimeState, from: number, to: number): RuntimeState {
  const { runtime, processes, threads } = state;
  if (from === 0 && to === processes.length + threads.length) return state;
  const p = processes.length;
  return {
    runtime,
    processes: processes.slice(Math.min(from, p), Math.min(to, p)),
    threads: threads.slice(Math.max(from - p, 0), Math.max(to - p, 0)),
  };
}
