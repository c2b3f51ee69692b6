import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import {
  deserializeMessage,
  serializeMessage,
  type JSONRPCMessage,
  type Transport,
} from '@modelcontextprotocol/client';
import type { Clock, Timer } from '@switchyard/clock';
import { UPSTREAM_MESSAGE_BYTES_MAX } from './engine.ts';
import { releaseGroup, watchGroup } from './reaper.ts';

/** Longest message a child may write on stdout, bytes. */
const STDOUT_LINE_BYTES_MAX = UPSTREAM_MESSAGE_BYTES_MAX;
/** How long a closed child gets to exit after its stdin ends, and again after SIGTERM, before SIGKILL. */
const EXIT_GRACE_MS = 2_000;
/**
 * Most bytes written to a child's stdin that its pipe has not taken yet
 * before a message is refused instead of queued: four requests of the
 * largest body a runtime accepts (4 MiB), so a server that reads in bursts
 * is not refused a large request, while one that stops reading costs the
 * runtime at most this much (and one message) however many calls it is sent.
 */
export const STDIN_BACKLOG_BYTES_MAX = 16 * 1024 * 1024;
/**
 * How long a child may take none of a backlog past STDIN_BACKLOG_BYTES_MAX
 * before it is stopped as stuck: as long as an answer may wait for its
 * client to take any of it (writeStallMs).
 */
export const STDIN_STALL_MS = 60_000;

/** What a child's stdin did to its messages: `refused` one (the backlog is past the cap), or `stalled` (it is stopped). */
export type StdinTrouble = 'refused' | 'stalled';

export interface ChildOptions {
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly cwd?: string;
  /** Given the child's stderr as soon as it is spawned; it must read it to the end. */
  readonly stderr: (stream: Readable, pid: number) => void;
  /** Told of each message refused and of a stall, with the bytes waiting on stdin; must not throw. */
  readonly stdinTrouble: (trouble: StdinTrouble, backlogBytes: number, pid: number) => void;
  /** Told of each stdout line that is no JSON-RPC message, which is skipped; must not throw. */
  readonly skipped?: (line: string, pid: number) => void;
  /** Times a stdin stall (STDIN_STALL_MS). */
  readonly clock: Clock;
}

/**
 * The stdio transport to one MCP server child (newline-delimited JSON-RPC
 * on stdin/stdout). Unlike the SDK's, the child is spawned as the leader of
 * its own process group (`detached`), so whatever it starts goes with it: a
 * server run through `npx`, `uvx` or a shell is a tree, and a signal to its
 * first process alone leaves the rest running. The group is listed with the
 * reaper (see watchGroup), which kills it if this process dies without
 * closing it.
 *
 * `close()` ends stdin, sends the group SIGTERM if the child has not exited
 * EXIT_GRACE_MS later, and SIGKILL after as long again; it resolves once the
 * child has exited. A child that exits on its own takes what is left of its
 * group with it. `onclose` comes once the child has exited and its stdout is
 * read to the end, or EXIT_GRACE_MS after its exit at the latest (a process
 * outside its group may hold its pipes). A stdout line that is no JSON-RPC
 * message is skipped (and told to `skipped`); one longer than STDOUT_LINE_BYTES_MAX stops the child at once
 * (SIGTERM, then as close()).
 *
 * A message sent while more than STDIN_BACKLOG_BYTES_MAX bytes wait for the
 * child to read them is not queued: `send` rejects at once (the SDK client
 * then rejects the request with that error). A backlog that stays past the
 * cap while the child takes none of it for STDIN_STALL_MS stops the child
 * as a stdout overflow does; one that it keeps reading, however slowly, does
 * not.
 */
export class ChildTransport implements Transport {
  onclose?: Transport['onclose'];
  onerror?: Transport['onerror'];
  onmessage?: Transport['onmessage'];
  readonly #opts: ChildOptions;
  /** The start of a line whose newline has not come yet, in the chunks it came in. */
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  /** A line outgrew STDOUT_LINE_BYTES_MAX: the child is being stopped and its stdout ignored. */
  #overflowed = false;
  #child: ChildProcess | undefined;
  #exit: { readonly exitCode: number | null; readonly signal: string | null } | undefined;
  #exited: Promise<void> = Promise.resolve();
  /** The child exited, its stdout ended and its group is off the reaper's list. */
  #closed: Promise<void> = Promise.resolve();
  #closing: Promise<void> | undefined;
  /** Bytes ever handed to stdin: less its backlog, what the child has taken. */
  #stdinBytes = 0;
  /** Settles when stdin next drains: what the sends waiting for it resolve with. */
  #drained: Promise<void> | undefined;
  /** Armed while the backlog is past the cap; see #watchStall. */
  #stall: Timer | undefined;

  constructor(opts: ChildOptions) {
    this.#opts = opts;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Bytes written to the child's stdin that its pipe has not taken yet. */
  get stdinBacklogBytes(): number {
    return this.#child?.stdin?.writableLength ?? 0;
  }

  /** The child's exit code or signal once it has exited; undefined until then. */
  get exit(): { readonly exitCode: number | null; readonly signal: string | null } | undefined {
    return this.#exit;
  }

  async start(): Promise<void> {
    if (this.#child) throw new Error('ChildTransport already started');
    const { command, args, env, cwd, stderr } = this.#opts;
    const child = spawn(command, [...args], {
      env: { ...env },
      ...(cwd !== undefined && { cwd }),
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    this.#child = child;
    // Listed at once (the pid is known before 'spawn'): a runtime killed right after the fork leaves no orphan.
    if (child.pid !== undefined) watchGroup(child.pid);
    this.#exited = new Promise((resolve) => {
      child.once('exit', (exitCode, signal) => {
        this.#exit = { exitCode, signal };
        resolve();
      });
      child.once('error', () => resolve());
    });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', (error) => {
        if (child.pid !== undefined) void releaseGroup(child.pid);
        reject(error);
      });
    });
    const pid = child.pid!;
    stderr(child.stderr!, pid);
    child.stdin!.on('error', (error) => this.onerror?.(error));
    child.stdout!.on('data', (chunk: Buffer) => this.#read(chunk));
    child.stdout!.on('error', (error) => this.onerror?.(error));
    this.#closed = new Promise((resolve) =>
      child.once('exit', () => {
        // What the child started dies with it. What escaped its group (a daemon in a session of its
        // own) may hold its stdout or stderr for ever, and 'close' waits for both: without the cut,
        // the child's death would never be seen and close() would never resolve.
        signalGroup(pid, 'SIGKILL');
        const late = setTimeout(() => {
          child.stdout!.destroy();
          child.stderr!.destroy();
        }, EXIT_GRACE_MS);
        late.unref();
        child.once('close', () => {
          clearTimeout(late);
          void releaseGroup(pid).finally(() => {
            resolve();
            this.onclose?.();
          });
        });
      }),
    );
  }

  /**
   * Splits stdout into lines, each chunk searched once and each line joined
   * once, so a long line costs time in proportion to its length (the SDK's
   * buffer copies everything held at every chunk: seconds of a blocked event
   * loop for a 10 MiB line).
   */
  #read(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl >= 0 && !this.#overflowed; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      if (this.#pendingBytes + piece.length > STDOUT_LINE_BYTES_MAX) return this.#overflow();
      const line = this.#pending.length > 0 ? Buffer.concat([...this.#pending, piece]) : piece;
      this.#pending = [];
      this.#pendingBytes = 0;
      this.#deliver(line.toString('utf8').replace(/\r$/, ''));
    }
    if (this.#overflowed || start === chunk.length) return;
    this.#pendingBytes += chunk.length - start;
    if (this.#pendingBytes > STDOUT_LINE_BYTES_MAX) return this.#overflow();
    this.#pending.push(chunk.subarray(start));
  }

  #deliver(line: string): void {
    let message: JSONRPCMessage;
    try {
      message = deserializeMessage(line);
    } catch (error) {
      // Not JSON (a banner, a stray print) is skipped, as the SDK's transport does; JSON that is no JSON-RPC message is reported.
      if (!(error instanceof SyntaxError)) this.onerror?.(error as Error);
      this.#opts.skipped?.(line, this.#child!.pid!);
      return;
    }
    this.onmessage?.(message);
  }

  /**
   * Its answers can no longer be matched to requests: the child is stopped
   * at once, not after the grace a clean close gives, so the calls waiting
   * on it fail now.
   */
  #overflow(): void {
    this.#overflowed = true;
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#abandon(new Error(`the stdio server wrote a line longer than ${STDOUT_LINE_BYTES_MAX} bytes`));
  }

  #abandon(error: Error): void {
    this.onerror?.(error);
    if (this.#child?.pid !== undefined) signalGroup(this.#child.pid, 'SIGTERM');
    void this.close();
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.#child?.stdin;
    if (!stdin?.writable || this.#closing) return Promise.reject(new Error('the stdio server is not running'));
    const backlog = stdin.writableLength;
    if (backlog > STDIN_BACKLOG_BYTES_MAX) {
      this.#opts.stdinTrouble('refused', backlog, this.#child!.pid!);
      return Promise.reject(new Error(`the stdio server is not reading its input (${mib(backlog)} wait for it)`));
    }
    // Bytes, not a string: the pipe counts a string's backlog in UTF-16 units.
    const line = Buffer.from(serializeMessage(message));
    this.#stdinBytes += line.length;
    if (stdin.write(line)) return Promise.resolve();
    if (stdin.writableLength > STDIN_BACKLOG_BYTES_MAX) this.#watchStall();
    // One listener for all the messages waiting, not one each.
    return (this.#drained ??= new Promise((resolve) =>
      stdin.once('drain', () => {
        this.#drained = undefined;
        resolve();
      }),
    ));
  }

  /**
   * Stops the child if it takes none of its backlog within STDIN_STALL_MS
   * while that stays past the cap: every message to it is refused, and its
   * calls wait for answers it cannot give, so its clients are better told it
   * died (they start over) than refused for as long as they keep it. A
   * message counts as taken once all of it is (the pipe's backlog shrinks by
   * whole writes): a child slower than one message per STDIN_STALL_MS (about
   * 70 KB/s for a 4 MiB one) passes for stuck.
   */
  #watchStall(): void {
    if (this.#stall) return;
    const taken = (): number => this.#stdinBytes - this.stdinBacklogBytes;
    const takenBefore = taken();
    this.#stall = this.#opts.clock.setTimeout(() => {
      this.#stall = undefined;
      const backlog = this.stdinBacklogBytes;
      if (this.#closing || backlog <= STDIN_BACKLOG_BYTES_MAX) return;
      if (taken() > takenBefore) return this.#watchStall();
      this.#opts.stdinTrouble('stalled', backlog, this.#child!.pid!);
      this.#abandon(new Error(`the stdio server read none of its input for ${STDIN_STALL_MS / 1000} s`));
    }, STDIN_STALL_MS);
  }

  close(): Promise<void> {
    return (this.#closing ??= this.#stop());
  }

  async #stop(): Promise<void> {
    const child = this.#child;
    this.#stall?.cancel();
    if (!child?.pid) return;
    const running = () => child.exitCode === null && child.signalCode === null;
    if (running()) child.stdin?.end();
    if (running() && !(await this.#exitWithin(EXIT_GRACE_MS))) {
      signalGroup(child.pid, 'SIGTERM');
      if (!(await this.#exitWithin(EXIT_GRACE_MS))) signalGroup(child.pid, 'SIGKILL');
    }
    await this.#closed;
    this.#pending = [];
  }

  /** True when the child exits within `ms`. */
  async #exitWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
    const exited = await Promise.race([this.#exited.then(() => true), timedOut]);
    clearTimeout(timer);
    return exited;
  }
}

/** `16.0 MiB`. */
function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** Signals every process of group `pgid`; a group already gone is no error. */
function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: nothing left in it.
  }
}
