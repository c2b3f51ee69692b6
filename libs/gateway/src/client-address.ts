// Where an anonymous request comes from, for the concurrency limit per
// client: its peer's address, or, when the peer is a proxy the operator
// trusts (an ingress controller, a load balancer), the address that proxy
// says it forwards for. Behind a proxy every client has the proxy's address,
// and one limit for all of them would be no per-client limit at all.
import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import { SwitchyardError } from '@switchyard/protocol';

const IPV4_MAPPED = '::ffff:';

/** A trustedProxies entry, read: one address or a block of them, or why it is neither. */
type Entry =
  { readonly address: string; readonly bits?: number; readonly type: 'ipv4' | 'ipv6' } | { readonly problem: string };

function parseEntry(entry: string): Entry {
  const [address = '', bits, extra] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined)
    return { problem: `"${entry}" is not an IP address nor a CIDR block (10.0.0.0/8)` };
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (bits === undefined) return { address, type };
  const max = family === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(bits) || Number(bits) > max)
    return { problem: `"${entry}": the prefix length must be 0 to ${max}` };
  return { address, bits: Number(bits), type };
}

/** Why `entry` cannot be a trustedProxies entry (an IP address or a CIDR block), or undefined when it can. */
export function trustedProxyProblem(entry: string): string | undefined {
  const parsed = parseEntry(entry);
  return 'problem' in parsed ? parsed.problem : undefined;
}

/** An IPv4 address as itself, not IPv4-mapped as a dual-stack socket reports it. */
function plain(address: string): string {
  return address.startsWith(IPV4_MAPPED) && isIP(address.slice(IPV4_MAPPED.length)) === 4
    ? address.slice(IPV4_MAPPED.length)
    : address;
}

/**
 * The address of an `X-Forwarded-For` hop, without the port some load
 * balancers append (`203.0.113.7:4711`, `[2001:db8::1]:4711`, RFC 7239's
 * forms): read as no address, such a hop would stop the walk at the trusted
 * proxy's own address, and every client behind it would share one limit.
 * A bare IPv6 address has colons of its own and is left as it is.
 */
function hopAddress(hop: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(hop);
  if (bracketed) return bracketed[1]!;
  const v4WithPort = /^([\d.]+):\d{1,5}$/.exec(hop);
  return v4WithPort && isIP(v4WithPort[1]!) === 4 ? v4WithPort[1]! : hop;
}

/**
 * The proxies whose `X-Forwarded-For` the gateway believes. A proxy appends
 * the address it received the request from, so the list is read from its
 * right end: past every trusted hop, the first address that is not one is
 * the client's. Anything to the left of it came from the client and is
 * ignored; so is the header of a peer not trusted (anyone can send it).
 */
export class TrustedProxies {
  readonly #list = new BlockList();
  readonly #any: boolean;

  constructor(entries: readonly string[]) {
    for (const entry of entries) {
      const parsed = parseEntry(entry);
      if ('problem' in parsed) throw new SwitchyardError('invalid_request', `trustedProxies: ${parsed.problem}`);
      if (parsed.bits === undefined) this.#list.addAddress(parsed.address, parsed.type);
      else this.#list.addSubnet(parsed.address, parsed.bits, parsed.type);
    }
    this.#any = entries.length > 0;
  }

  /** The client's address: the peer's, unless the peer is a trusted proxy that names whom it forwards for. */
  clientOf(req: IncomingMessage): string {
    let client = plain(req.socket.remoteAddress ?? 'unknown');
    if (!this.#any || !this.#trusts(client)) return client;
    const forwarded = req.headers['x-forwarded-for'];
    if (typeof forwarded !== 'string') return client;
    const hops = forwarded.split(',');
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = plain(hopAddress(hops[i]!.trim()));
      // Not an address: written by the client, or a proxy we cannot read; the last hop we could read is it.
      if (isIP(hop) === 0) return client;
      client = hop;
      if (!this.#trusts(hop)) return client;
    }
    return client;
  }

  #trusts(address: string): boolean {
    const family = isIP(address);
    return family !== 0 && this.#list.check(address, family === 4 ? 'ipv4' : 'ipv6');
  }
}
