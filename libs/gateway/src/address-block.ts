// The block of addresses an anonymous client is counted by. An IPv4
// address is one client. An IPv6 address is not: a home or a cloud host is
// handed a whole /64 and picks addresses in it at will (temporary addresses
// rotate by themselves), so a limit per IPv6 address is a limit a client
// lifts by changing address. A /64 is what one subscriber gets, the usual
// unit for limits on IPv6 clients.
import { isIP } from 'node:net';

/** The eight 16-bit groups of an IPv6 address that `isIP` accepted, an IPv4 tail read as two. */
function groupsOf(address: string): number[] {
  const words = (part: string): number[] =>
    part === ''
      ? []
      : part.split(':').flatMap((word) => {
          if (!word.includes('.')) return [parseInt(word, 16)];
          const [a = 0, b = 0, c = 0, d = 0] = word.split('.').map(Number);
          return [(a << 8) | b, (c << 8) | d];
        });
  const [head = '', tail] = address.split('::');
  const left = words(head);
  const right = tail === undefined ? [] : words(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

/**
 * `address` itself when it is IPv4 (or no address), else the block of its
 * first `ipv6PrefixLength` bits, as `2001:db8:0:7:0:0:0:0/64`; 128 keeps
 * each IPv6 address apart.
 */
export function addressBlock(address: string, ipv6PrefixLength: number): string {
  const bare = address.split('%', 1)[0]!; // a link-local address's zone names an interface, not a client
  if (isIP(bare) !== 6 || ipv6PrefixLength >= 128) return address;
  const groups = groupsOf(bare).map((group, i) => {
    const kept = Math.min(16, Math.max(0, ipv6PrefixLength - 16 * i));
    return kept === 0 ? 0 : group & (0xffff << (16 - kept)) & 0xffff;
  });
  return `${groups.map((group) => group.toString(16)).join(':')}/${ipv6PrefixLength}`;
}
