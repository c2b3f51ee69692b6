// For tests: a gateway's side of a relay connection on a raw socket, so that
// the bytes on the wire are the test's to see (`@switchyard/tunnel/testing`).
import { once } from 'node:events';
import net from 'node:net';
import { RELAY } from '@switchyard/protocol';

/**
 * Longest wait for an answer: a server that neither answers nor closes fails
 * the test that asked, naming what it read, instead of holding its file
 * until the runner's own timeout (or for ever, once its tests are done).
 */
const ANSWER_WAIT_MS = 30_000;

/**
 * What `answer` settles, or a failure naming what `socket` read when it has
 * not settled within ANSWER_WAIT_MS; the socket is then destroyed, so that
 * nothing it holds keeps the test's process alive.
 */
function bounded<T>(
  what: string,
  socket: net.Socket,
  read: () => string,
  answer: (settle: { resolve(value: T): void; reject(error: unknown): void }) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`${what}: no whole answer within ${ANSWER_WAIT_MS} ms; read ${JSON.stringify(read())}`));
      socket.destroy();
    }, ANSWER_WAIT_MS);
    answer({
      resolve: (value) => (clearTimeout(timer), resolve(value)),
      reject: (error) => (clearTimeout(timer), reject(error)),
    });
  });
}

/** One HTTP/1.1 answer read off a socket. */
export interface RawAnswer {
  readonly status: number;
  /** Status line and headers, without the blank line. */
  readonly head: string;
  readonly body: string;
}

/**
 * Asks the server at `port` for a relay on `path` (the scheduler's is
 * `/api/relay/<runtime>`), with `upgrade` as the `Upgrade` token and
 * `headers` besides; resolves
 * with the answer's status (0 when none came) and whole text (a refusal is
 * read to its end, another answer to its declared length) and the socket,
 * paused. Fails when neither an answer nor a close comes within 30 s.
 */
export async function askRelay(
  port: number,
  path: string,
  upgrade: string = RELAY.upgrade,
  headers: Readonly<Record<string, string>> = {},
): Promise<{ status: number; text: string; socket: net.Socket }> {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  await once(socket, 'connect');
  const extra = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: scheduler\r\n${extra.join('')}Connection: Upgrade\r\nUpgrade: ${upgrade}\r\n\r\n`,
  );
  let read = '';
  const text = await bounded<string>(
    `relay on ${path}`,
    socket,
    () => read,
    ({ resolve }) => {
      const onData = (chunk: Buffer): void => {
        read += chunk.toString('latin1');
        const end = read.indexOf('\r\n\r\n');
        if (end === -1) return;
        // A 101 is all head. Any other answer is read to the close it
        // announces (a refusal), else to its declared length: a server that
        // answers as to a plain request may keep the connection.
        const head = read.slice(0, end);
        const declared = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? NaN);
        const closing = /^connection: close$/im.test(head);
        const whole = read.startsWith('HTTP/1.1 101') || (!closing && read.length >= end + 4 + declared);
        if (!whole) return;
        socket.off('data', onData).off('end', onEnd).off('close', onEnd).pause();
        resolve(read);
      };
      const onEnd = (): void => resolve(read);
      socket.on('data', onData).once('end', onEnd).once('close', onEnd);
    },
  );
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1];
  return { status: status === undefined ? 0 : Number(status), text, socket };
}

/**
 * Writes `request` (raw HTTP/1.1) on `socket` and reads one answer, which
 * must declare its length (or have none); leaves the socket paused. Fails
 * on a close before it, or when it has not come within 30 s.
 */
export function exchangeRaw(socket: net.Socket, request: string): Promise<RawAnswer> {
  let read = Buffer.alloc(0);
  return bounded<RawAnswer>(
    'raw exchange',
    socket,
    () => read.toString('latin1'),
    ({ resolve, reject }) => {
      const onData = (chunk: Buffer): void => {
        read = Buffer.concat([read, chunk]);
        const end = read.indexOf('\r\n\r\n');
        if (end === -1) return;
        const head = read.toString('latin1', 0, end);
        const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
        if (read.length < end + 4 + length) return;
        socket.off('data', onData).off('close', reject).pause();
        resolve({ status: Number(head.slice(9, 12)), head, body: read.toString('utf8', end + 4, end + 4 + length) });
      };
      socket.on('data', onData).once('close', reject).resume();
      socket.write(request);
    },
  );
}
