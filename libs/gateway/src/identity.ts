import { randomBytes } from 'node:crypto';
import { SwitchyardError, isIdentityValue } from '@switchyard/protocol';

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

/**
 * Parses `default:<value>`, `random`, `mcp-session`, `header:<Name>`,
 * `query:<name>`, `path:<param>` or `principal`. Throws
 * SwitchyardError('invalid_request') for anything else (a configuration error).
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
    case 'header':
      return { kind, name: needArg().toLowerCase() };
    case 'query':
    case 'path':
      return { kind, name: needArg() };
    default:
      throw new SwitchyardError('invalid_request', `unknown identity strategy '${text}'`);
  }
}

/** A fresh 128-bit CSPRNG id, hex so it is a valid identity value. */
export function randomId(): string {
  return randomBytes(16).toString('hex');
}

function describe(s: IdentityStrategy): string {
  return s.kind === 'header' || s.kind === 'query' || s.kind === 'path' ? `${s.kind} ${s.name}` : s.kind;
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
    case 'header':
      return src.headers[s.name];
    case 'query':
      return src.query[s.name];
    case 'path':
      return src.params[s.name];
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
