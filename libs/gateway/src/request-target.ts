import { parse as parseQuery } from 'node:querystring';
import { SwitchyardError } from '@switchyard/protocol';

/** Where a request points: the matched `/mcp` route's path parameters and its raw query. */
export interface RequestTarget {
  /** `class` and `process` on `/mcp/:class/:process`; empty on `/mcp`. */
  readonly params: Readonly<Record<string, string | undefined>>;
  /** The text after `?`, undecoded; `''` when absent. */
  readonly search: string;
}

/** The parameters of `/mcp/:class/:process`, all a path strategy may read. */
export const TARGET_PARAMS: readonly string[] = ['class', 'process'];

const NO_PARAMS: Readonly<Record<string, string | undefined>> = Object.freeze({});
const MCP = '/mcp';

function decodeSegment(segment: string): string {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch (cause) {
    throw new SwitchyardError('bad_identity', 'Path segment is not valid percent-encoding', { cause });
  }
}

/**
 * Matches `/mcp` and `/mcp/:class/:process` as the express routes did
 * (case-insensitive, one trailing slash allowed, parameters percent-decoded).
 * Returns undefined for any other path. Throws SwitchyardError('bad_identity')
 * for a parameter that is not valid percent-encoding. Done by hand because a
 * router cost more per request than the rest of the gateway's own work.
 */
export function matchTarget(url: string | undefined): RequestTarget | undefined {
  const split = splitTarget(url);
  if (!split) return undefined;
  const { path, search } = split;
  if (path.length < MCP.length || path.slice(0, MCP.length).toLowerCase() !== MCP) return undefined;
  if (path.length === MCP.length) return { params: NO_PARAMS, search };
  if (path.charCodeAt(MCP.length) !== 47) return undefined;
  const rest = path.slice(MCP.length + 1).split('/');
  if (rest.length !== 2 || rest[0] === '' || rest[1] === '') return undefined;
  return { params: { class: decodeSegment(rest[0]!), process: decodeSegment(rest[1]!) }, search };
}

/** A request target's path (one trailing slash dropped) and its raw query; undefined for an unparsable one. */
function splitTarget(url: string | undefined): { path: string; search: string } | undefined {
  let raw = url ?? '/';
  // Absolute-form request targets (`POST http://host/mcp`) are legal HTTP/1.1.
  if (raw.charCodeAt(0) !== 47 /* '/' */) {
    if (!URL.canParse(raw)) return undefined;
    const parsed = new URL(raw);
    raw = parsed.pathname + parsed.search;
  }
  const q = raw.indexOf('?');
  let path = q === -1 ? raw : raw.slice(0, q);
  const search = q === -1 ? '' : raw.slice(q + 1);
  if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
  return { path, search };
}

/**
 * What the 404 for a target matchTarget refused says. The path form short of
 * its process (`/mcp/<class>`) is most likely half of a sandbox's URL: its
 * message names the missing part rather than listing both forms.
 */
export function notFoundMessage(url: string | undefined): string {
  const path = splitTarget(url)?.path;
  if (path !== undefined && /^\/mcp\/[^/]+$/i.test(path)) {
    return 'Not found: the process part is missing; the path form is /mcp/<class>/<process>, or use /mcp';
  }
  return 'Not found: the MCP endpoint is /mcp, or /mcp/<class>/<process>';
}

/** The query as `node:querystring` reads it (repeated keys become arrays), parsed only when asked for. */
export function parseSearch(search: string): Readonly<Record<string, unknown>> {
  return search === '' ? NO_PARAMS : parseQuery(search);
}
