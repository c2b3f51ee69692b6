// Inputs that once broke (or nearly broke) a target, replayed on every run
// before the random cases. When a fuzz run fails, its report prints the input
// as JSON: paste it into the target's table with a note saying what it broke
// and the commit that fixed it. Bytes are written as base64 strings.
//
// No fuzz run has failed so far, so the tables hold hand-picked edge cases
// (named by their note) to keep the mechanism exercised; each entry is a
// case of the same shape its fuzzer generates.

export interface Regression<T> {
  readonly note: string;
  readonly input: T;
}

/** POST /api/schedule: `body` is sent as-is (a string) or base64 bytes when `bytes` is set. */
export interface ScheduleCase {
  readonly body: string;
  readonly bytes?: boolean;
  readonly contentType?: string;
}

export const SCHEDULE_REGRESSIONS: ReadonlyArray<Regression<ScheduleCase>> = [
  { note: 'JSON null body', input: { body: 'null' } },
  {
    note: 'prototype key in the body',
    input: { body: '{"__proto__":{"class":"demo"},"class":"demo","processId":"p"}' },
  },
  { note: 'deeply nested array', input: { body: '['.repeat(5000) + ']'.repeat(5000) } },
  {
    note: 'invalid UTF-8 bytes',
    input: { body: Buffer.from([0xc3, 0x28, 0xff, 0xfe]).toString('base64'), bytes: true },
  },
  {
    note: 'replicasLimit as a float',
    input: { body: '{"class":"demo","processId":"p","loadBalance":{"replicasLimit":1.5}}' },
  },
];

/** One WebSocket text (or binary, base64) frame to /api/sync/:replica. */
export interface SyncCase {
  readonly replica: string;
  readonly frame: string;
  readonly binary?: boolean;
}

export const SYNC_REGRESSIONS: ReadonlyArray<Regression<SyncCase>> = [
  {
    note: 'commit from a term far ahead',
    input: {
      replica: 's1',
      frame: '{"type":"commit","term":9007199254740991,"epoch":1,"body":{"kind":"delta","baseEpoch":0,"ops":[]}}',
    },
  },
  {
    note: 'collect with an absurd version',
    input: {
      replica: 's1',
      frame:
        '{"type":"collect","term":0,"epoch":0,"replica":"s1","version":1e300,"part":{"kind":"full","runtimes":[]}}',
    },
  },
  {
    note: 'binary garbage',
    input: { replica: 'zz', frame: Buffer.from([0, 1, 2, 255]).toString('base64'), binary: true },
  },
];

/** An upgrade request to /api/runtime/connect with raw header values (undefined: header absent). */
export interface ConnectCase {
  readonly authorization?: string;
  readonly runtimeInfo?: string;
}

export const CONNECT_REGRESSIONS: ReadonlyArray<Regression<ConnectCase>> = [
  {
    note: 'info decoding to JSON null',
    input: { authorization: 'valid', runtimeInfo: Buffer.from('null').toString('base64url') },
  },
  { note: 'bearer without token', input: { authorization: 'Bearer ', runtimeInfo: 'e30' } },
  {
    note: 'info with a huge classes array',
    input: {
      authorization: 'valid',
      runtimeInfo: Buffer.from(JSON.stringify({ id: 'x', classes: Array(5000).fill('a') })).toString('base64url'),
    },
  },
];

/** Raw SSE text served as a runtime's /watch stream. */
export interface WatchCase {
  readonly stream: string;
}

export const WATCH_REGRESSIONS: ReadonlyArray<Regression<WatchCase>> = [
  { note: 'delta before any snapshot', input: { stream: 'id: 1\nevent: delta\ndata: {"ops":[]}\n\n' } },
  {
    note: 'snapshot in parts whose stream ends before its snapshot-end',
    input: { stream: 'id: 1\nevent: snapshot-part\ndata: {"part":0,"processes":["p"],"threads":[]}\n\n' },
  },
  {
    note: 'snapshot-end announcing more parts than came',
    input: {
      stream:
        'id: 1\nevent: snapshot-part\ndata: {"part":0,"processes":["p"],"threads":[]}\n\n' +
        'id: 1\nevent: snapshot-end\ndata: {"parts":2,"idleWeight":{},"metadata":{}}\n\n',
    },
  },
  {
    note: 'snapshot with a non-numeric id',
    input: { stream: 'id: x\nevent: snapshot\ndata: {"processes":[],"threads":[],"idleWeight":{},"metadata":{}}\n\n' },
  },
  {
    note: 'thread.remove of an unknown process',
    input: {
      stream:
        'id: 1\nevent: snapshot\ndata: {"processes":[],"threads":[],"idleWeight":{},"metadata":{}}\n\nid: 2\nevent: delta\ndata: {"ops":[{"op":"thread.remove","process":"p","thread":"t"}]}\n\n',
    },
  },
];

/** Bytes a fake runtime writes into its tunnel after the WebSocket handshake (base64). */
export interface TunnelCase {
  readonly bytes: string;
}

export const TUNNEL_REGRESSIONS: ReadonlyArray<Regression<TunnelCase>> = [
  {
    note: 'an empty SETTINGS frame, then GOAWAY',
    input: {
      bytes: Buffer.from('000000040000000000' + '0000080700000000000000000000000000', 'hex').toString('base64'),
    },
  },
  {
    note: 'a SETTINGS frame of absurd length',
    input: { bytes: Buffer.from('ffffff040000000000', 'hex').toString('base64') },
  },
];

export type RelayCase =
  | { readonly kind: 'ask'; readonly path: string; readonly upgrade: string }
  /** Bytes (base64) written on a relay the scheduler granted into runtime r0. */
  | { readonly kind: 'bytes'; readonly bytes: string };

const base64 = (text: string): string => Buffer.from(text, 'latin1').toString('base64');
const NOTIFICATION = '{"jsonrpc":"2.0","method":"notifications/initialized"}';

export const RELAY_REGRESSIONS: ReadonlyArray<Regression<RelayCase>> = [
  {
    note: 'a WebSocket upgrade on the relay path',
    input: { kind: 'ask', path: '/api/relay/r0', upgrade: 'websocket' },
  },
  {
    note: 'a relay to a runtime id that is not one',
    input: { kind: 'ask', path: '/api/relay/%', upgrade: 'switchyard-relay' },
  },
  {
    note: 'a request that declares more body than it sends',
    input: { kind: 'bytes', bytes: base64('POST /mcp HTTP/1.1\r\nHost: r\r\nContent-Length: 100000\r\n\r\n{}') },
  },
  {
    note: 'a notification without a session, then bytes that are no HTTP',
    input: {
      kind: 'bytes',
      bytes: base64(
        'POST /mcp HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n' +
          `X-Switchyard-Class: demo\r\nContent-Length: ${NOTIFICATION.length}\r\n\r\n${NOTIFICATION}\x00\xff`,
      ),
    },
  },
];
