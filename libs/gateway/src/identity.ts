import { randomBytes } from 'node:crypto';
import { HOP_BY_HOP_HEADERS, IDENTITY_HEADERS, SwitchyardError, isIdentityValue } from '@switchyard/protocol';
import { TARGET_PARAMS } from './request-target.ts';

/** Where one identity part comes from (design brief §2). */
export type IdentityStrategy =
  | { readonly kind: 'default'; readonly value: string }
  | { readonly kind: 'random' }
  | { readonly kind: 'mcp-session' }
  | { readonly kind: 'header'; readonly name: string }
  | { readonly kind: 'query'; readonly name: string }
  | { readonly kind: 'path'; readonly name: string }
  | { readonly kind: 'principal' };

/** What a strategy may read from one request. Header names are lower case. */
export interface IdentitySource {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly query: Readonly<Record<string, unknown>>;
  readonly params: Readonly<Record<string, string | undefined>>;
  readonly sessionId?: string;
  readonly principal?: string;
}

export type IdentityPart = 'class' | 'process' | 'thread';

/** An HTTP field name (RFC 9110 §5.1: a token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Headers clients send that name no sandbox: one connection's, computed per
 * hop, or credentials, which never reach runtimes but would, as an identity.
 */
const NOT_IDENTITY_HEADERS: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP_HEADERS,
  'host',
  'content-length',
  'authorization',
  'cookie',
]);

/**
 * Why no strategy may read header `name` (lower case), or undefined if one
 * may. Of `X-Switchyard-*` only the class and process come from clients;
 * the rest are the gateway's and schedulers' own, and a client's copy,
 * stripped before it goes on, would be trusted if read here.
 */
function unreadableHeader(name: string): string | undefined {
  if (!HEADER_NAME.test(name)) return 'is not a header name';
  if (NOT_IDENTITY_HEADERS.has(name)) return 'is a connection or credential header';
  const fromClients = name === IDENTITY_HEADERS.class || name === IDENTITY_HEADERS.process;
  if (name.startsWith('x-switchyard-') && !fromClients) return 'is set by Switchyard, not by clients';
  return undefined;
}

/**
 * Parses `default:<value>`, `random`, `mcp-session`, `header:<Name>`,
 * `query:<name>`, `path:<param>` or `principal`. Throws
 * SwitchyardError('invalid_request') for anything else (a configuration
 * error), including a header no client may name a sandbox by (see
 * `unreadableHeader`) and a path parameter other than `class` and `process`.
 */
export function parseStrategy(text: string): IdentityStrategy {
  const colon = text.indexOf(':');
  const kind = colon === -1 ? text : text.slice(0, colon);
  const arg = colon === -1 ? '' : text.slice(colon + 1);
  const needArg = (): string => {
    if (arg === '') throw new SwitchyardError('invalid_request', `identity strategy '${text}' needs an argument`);
    return arg;
  };
  switch (kind) {
    case 'default':
      if (!isIdentityValue(arg)) throw new SwitchyardError('invalid_request', `'${text}' is not an identity value`);
      return { kind, value: arg };
    case 'random':
    case 'mcp-session':
    case 'principal':
      if (arg !== '') throw new SwitchyardError('invalid_request', `identity strategy '${kind}' takes no argument`);
      return { kind };
    case 'header': {
      const name = needArg().toLowerCase();
      const why = unreadableHeader(name);
      if (why) throw new SwitchyardError('invalid_request', `identity strategy '${text}': '${name}' ${why}`);
      return { kind, name };
    }
    case 'query':
      return { kind, name: needArg() };
    case 'path':
      if (!TARGET_PARAMS.includes(needArg())) {
        throw new SwitchyardError(
          'invalid_request',
          `identity strategy '${text}': the path has ${TARGET_PARAMS.join(' and ')}`,
        );
      }
      return { kind, name: arg };
    default:
      throw new SwitchyardError('invalid_request', `unknown identity strategy '${text}'`);
  }
}

/** A fresh 128-bit CSPRNG id, hex so it is a valid identity value. */
export function randomId(): string {
  return randomBytes(16).toString('hex');
}

/** How a strategy is named in messages: `header X-Switchyard-Class`, `path class`, `principal`. */
export function describe(s: IdentityStrategy): string {
  return s.kind === 'header' || s.kind === 'query' || s.kind === 'path' ? `${s.kind} ${s.name}` : s.kind;
}

function own(record: Readonly<Record<string, unknown>>, name: string): unknown {
  return Object.hasOwn(record, name) ? record[name] : undefined;
}

function raw(s: IdentityStrategy, src: IdentitySource): unknown {
  switch (s.kind) {
    case 'default':
      return s.value;
    case 'random':
      return randomId();
    case 'mcp-session':
      return src.sessionId;
    case 'principal':
      return src.principal;
    // Own properties only: a name like `constructor` must not read what every object inherits.
    case 'header':
      return own(src.headers, s.name);
    case 'query':
      return own(src.query, s.name);
    case 'path':
      return own(src.params, s.name);
  }
}

/**
 * First value the chain yields, or undefined when none applies. A value that
 * is present but malformed is a client error: SwitchyardError('bad_identity')
 * naming the part and its source, never silently skipped.
 */
export function resolvePart(
  part: IdentityPart,
  chain: readonly IdentityStrategy[],
  src: IdentitySource,
): string | undefined {
  for (const strategy of chain) {
    const value = raw(strategy, src);
    if (value === undefined || value === '') continue;
    if (!isIdentityValue(value)) {
      throw new SwitchyardError(
        'bad_identity',
        `invalid ${part} identity from ${describe(strategy)}: must be 1-128 characters from [A-Za-z0-9._:@-]`,
      );
    }
    return value;
  }
  return undefined;
}
