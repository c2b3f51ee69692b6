import { SwitchyardError } from '@switchyard/protocol';

/** `scheme://host` and an optional `:port`, IPv6 hosts in brackets: how browsers send Origin. */
const ORIGIN = /^(https?:\/\/(?:\[[0-9a-f:.]+\]|[a-z0-9.-]+))(?::(\d{1,5}))?$/;
const ANY_PORT = ':*';

/** An allowedOrigins entry, read: an exact origin, every port of `scheme://host`, or why it is neither. */
type Entry = { readonly exact: string } | { readonly anyPort: string } | { readonly problem: string };

function parseEntry(entry: string): Entry {
  if (entry === 'null') return { exact: entry };
  const wildcard = entry.endsWith(ANY_PORT);
  const origin = wildcard ? entry.slice(0, -ANY_PORT.length) : entry;
  const match = ORIGIN.exec(origin);
  // Browsers send an origin as the URL standard serializes it: an IPv6 host compressed, no default port.
  const sent = match && URL.canParse(origin) ? new URL(origin).origin : undefined;
  if (match && sent !== origin) {
    const hint = sent === undefined ? '' : `, write ${sent}${wildcard ? ANY_PORT : ''}`;
    return { problem: `"${entry}" is not an origin as browsers send it${hint}` };
  }
  if (match && !wildcard) return { exact: entry };
  if (match && match[2] === undefined) return { anyPort: match[1]! };
  return { problem: `"${entry}" is not an origin (scheme://host[:port], lower case, no path) nor scheme://host:*` };
}

/** Why `entry` cannot be an allowedOrigins entry (see OriginPolicy), or undefined when it can. */
export function originEntryProblem(entry: string): string | undefined {
  const parsed = parseEntry(entry);
  return 'problem' in parsed ? parsed.problem : undefined;
}

/**
 * Which browser origins may call `/mcp` (a request without `Origin` is not a
 * browser's and passes). An entry is an exact origin (`https://app.example`,
 * `http://localhost:6274`), the literal `null` (sandboxed and file pages), or
 * `scheme://host:*` for every port of one host — what a gateway on a
 * developer's machine wants for browser clients served from localhost.
 * Entries are checked once: one that can never match a real Origin (a path,
 * a trailing slash, upper case, a default port, an IPv6 host not compressed
 * as the URL standard writes it) is a configuration error, not a silent 403.
 */
export class OriginPolicy {
  readonly #exact = new Set<string>();
  /** `scheme://host` of the `:*` entries. */
  readonly #anyPort = new Set<string>();

  constructor(entries: readonly string[]) {
    for (const entry of entries) {
      const parsed = parseEntry(entry);
      if ('problem' in parsed) throw new SwitchyardError('invalid_request', `allowedOrigins: ${parsed.problem}`);
      if ('exact' in parsed) this.#exact.add(parsed.exact);
      else this.#anyPort.add(parsed.anyPort);
    }
  }

  allows(origin: string): boolean {
    if (this.#exact.has(origin)) return true;
    if (this.#anyPort.size === 0) return false;
    const match = ORIGIN.exec(origin);
    return match !== null && this.#anyPort.has(match[1]!);
  }
}
