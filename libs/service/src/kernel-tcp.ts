import { readFile } from 'node:fs/promises';

/** What the kernel tells of a connection's sent data that its peer has not acknowledged. */
export interface UnackedState {
  /** Bytes sent and not acknowledged (`tx_queue`). */
  readonly unackedBytes: number;
  /** Retransmissions of the oldest of them so far (`retrnsmt`; back to 0 once the peer acknowledges). */
  readonly retransmits: number;
}

/** `tr` of a connection whose retransmission timer runs (ICSK_TIME_RETRANS). */
const RETRANSMIT_TIMER = '01';

/**
 * The key of a connection, the same from a socket and from a line of /proc/net/tcp{,6}. Both ends, local address
 * included: those files list every connection of the network namespace (other listeners', other processes'),
 * and a listener on one port at another local address may hold a connection from the same remote address and port.
 */
export function connectionKey(
  localAddress: string,
  localPort: number,
  remoteAddress: string,
  remotePort: number,
): string {
  return `${canonicalAddress(localAddress)} ${localPort} ${canonicalAddress(remoteAddress)} ${remotePort}`;
}

/**
 * Node's dotted IPv4 and IPv4-mapped IPv6 reduced to dotted; other IPv6 to the URL parser's compressed form,
 * without the zone Node appends to a link-local address (`fe80::1%eth0`): /proc does not write it, and the URL
 * parser throws on it.
 */
function canonicalAddress(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (!address.includes(':')) return address;
  const zone = address.indexOf('%');
  return new URL(`http://[${zone === -1 ? address : address.slice(0, zone)}]`).hostname.slice(1, -1);
}

/** An address as /proc/net/tcp{,6} writes it: 32-bit words in host (little-endian) byte order. */
function procAddress(hex: string): string {
  const bytes: number[] = [];
  for (let word = 0; word < hex.length; word += 8) {
    for (let b = 6; b >= 0; b -= 2) bytes.push(parseInt(hex.slice(word + b, word + b + 2), 16));
  }
  if (bytes.length === 4) return bytes.join('.');
  const mapped = bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  if (mapped) return bytes.slice(12).join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  return canonicalAddress(groups.join(':'));
}

/**
 * The connections of a /proc/net/tcp or tcp6 text whose retransmission timer
 * runs with at least one retransmission made, by connectionKey.
 */
export function parseRetransmitting(text: string, into: Map<string, UnackedState>): void {
  // Only `tr:when` reads " 01:" (sl is space-padded; addresses and queues have eight hex digits before a colon),
  // so the text is searched for it rather than split: a gateway's tens of thousands of lines are mostly idle.
  const marker = ` ${RETRANSMIT_TIMER}:`;
  for (let at = text.indexOf(marker); at !== -1; at = text.indexOf(marker, at + 1)) {
    const end = text.indexOf('\n', at);
    const line = text.slice(text.lastIndexOf('\n', at) + 1, end === -1 ? text.length : end);
    if (end !== -1) at = end;
    // sl local rem st tx:rx tr:when retrnsmt ...
    const fields = line.trim().split(/\s+/, 7);
    if (fields.length < 7 || !fields[5]!.startsWith(`${RETRANSMIT_TIMER}:`)) continue;
    const retransmits = parseInt(fields[6]!, 16);
    const unackedBytes = parseInt(fields[4]!.split(':', 1)[0]!, 16);
    if (!(retransmits > 0 && unackedBytes > 0)) continue;
    const [localHex, localPortHex] = fields[1]!.split(':') as [string, string];
    const [remoteHex, remotePortHex] = fields[2]!.split(':') as [string, string];
    if (!localHex || !remoteHex) continue;
    const key = connectionKey(
      procAddress(localHex),
      parseInt(localPortHex, 16),
      procAddress(remoteHex),
      parseInt(remotePortHex, 16),
    );
    into.set(key, { unackedBytes, retransmits });
  }
}

/**
 * The connections of this process's network namespace that are
 * retransmitting, from /proc/self/net/tcp and tcp6; undefined where those
 * cannot be read (not Linux, no /proc).
 */
export async function readRetransmitting(): Promise<Map<string, UnackedState> | undefined> {
  const texts = await Promise.all(
    ['/proc/self/net/tcp', '/proc/self/net/tcp6'].map((path) => readFile(path, 'latin1').catch(() => undefined)),
  );
  if (texts.every((t) => t === undefined)) return undefined;
  const found = new Map<string, UnackedState>();
  for (const text of texts) if (text !== undefined) parseRetransmitting(text, found);
  return found;
}
