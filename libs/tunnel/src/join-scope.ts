/**
 * A join token as configured: the token, and optionally after blanks the
 * runtime ids it admits, as a glob where `*` stands for any run of
 * characters (`s3cr3t… gpu-*`). A token without a pattern admits any id.
 */
export interface JoinToken {
  readonly token: string;
  /** The pattern as written; undefined for a token that admits any id. */
  readonly idPattern: string | undefined;
  admits(runtimeId: string): boolean;
}

/** A pattern's characters: those of a runtime id, and `*`. */
const ID_PATTERN = /^[A-Za-z0-9._:@*-]{1,128}$/;

/** Why a join token line is malformed, or undefined when it is well formed (for config validation). */
export function joinTokenLineProblem(line: string): string | undefined {
  const fields = line.trim().split(/\s+/);
  if (fields.length > 2) return 'a join token line is a token, optionally followed by one runtime id pattern';
  if (fields.length === 2 && !ID_PATTERN.test(fields[1]!)) {
    return 'a runtime id pattern is 1-128 characters from [A-Za-z0-9._:@-] and *';
  }
  return undefined;
}

/** Lists parsed, by list identity: a token source keeps a list's identity until its file changes. */
const parsed = new WeakMap<readonly string[], readonly JoinToken[]>();

/**
 * The join tokens of configured lines. A malformed line (see
 * `joinTokenLineProblem`) keeps its token but admits no id: a typo in a
 * scope must not widen it to every id.
 */
export function parseJoinTokens(lines: readonly string[]): readonly JoinToken[] {
  let tokens = parsed.get(lines);
  if (!tokens) {
    tokens = lines.map(parseLine);
    parsed.set(lines, tokens);
  }
  return tokens;
}

const unscoped = new WeakMap<readonly string[], readonly string[]>();

/**
 * The tokens of lines that carry no pattern: those admit any id, so they may
 * stand in as peer tokens (a scoped one must not: a peer reports runtimes of
 * any id). The result keeps its identity as long as `lines` does.
 */
export function unscopedJoinTokens(lines: readonly string[]): readonly string[] {
  let tokens = unscoped.get(lines);
  if (!tokens) {
    tokens = parseJoinTokens(lines)
      .filter((t) => t.idPattern === undefined)
      .map((t) => t.token);
    unscoped.set(lines, tokens);
  }
  return tokens;
}

function parseLine(line: string): JoinToken {
  const [token = '', idPattern] = line.trim().split(/\s+/);
  if (idPattern === undefined) return { token, idPattern, admits: () => true };
  if (joinTokenLineProblem(line) !== undefined) return { token, idPattern, admits: () => false };
  const glob = new RegExp(`^${idPattern.split('*').map(escape).join('.*')}$`);
  return { token, idPattern, admits: (runtimeId) => glob.test(runtimeId) };
}

function escape(literal: string): string {
  return literal.replace(/[.]/g, '\\.');
}
