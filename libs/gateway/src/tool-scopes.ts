// auth.toolScopes at run time: the scopes a `tools/call` of each listed tool
// needs, whatever class serves it.
import { InsufficientScopeError } from './challenge.ts';
import { lacksAny } from './jwt-claims.ts';
import type { AuthOptions } from './options.ts';

/**
 * Which tools a token may call. A tool is known by its name alone, in every
 * class: the class a request names is its client's word (a legacy session's
 * requests are served by the class it was opened to, see ClassScopes), so a
 * check keyed by class and tool could be dodged by naming another class,
 * and one keyed by name cannot. The name is the one the body calls (what a
 * runtime runs), not `Mcp-Name`. Not guaranteed: that a tool of the same
 * name in two classes is the same tool; both are held to its scopes.
 */
export class ToolScopes {
  /** Listed tool → the scopes a call of it needs: auth.requiredScopes, then the tool's own. */
  readonly #needs = new Map<string, readonly string[]>();

  constructor(toolScopes: Readonly<Record<string, readonly string[]>>, requiredScopes: readonly string[] = []) {
    for (const [tool, scopes] of Object.entries(toolScopes)) {
      this.#needs.set(tool, [...new Set([...requiredScopes, ...scopes])]);
    }
  }

  /**
   * Throws InsufficientScopeError (403, `tool_scope`) when `granted` lacks a
   * scope of a listed tool among `tools` (the tools a body calls, every call
   * of a batch): named after the first such tool, the challenge names the
   * scopes of every listed one, so that one step-up admits the whole batch.
   * Passes any other tool.
   */
  admit(tools: readonly string[], granted: ReadonlySet<string> | undefined): void {
    let needs: Set<string> | undefined;
    let short: string | undefined;
    for (const tool of tools) {
      const scopes = this.#needs.get(tool);
      if (scopes === undefined) continue;
      if (short === undefined && (granted === undefined || lacksAny(granted, scopes))) short = tool;
      needs ??= new Set();
      for (const scope of scopes) needs.add(scope);
    }
    if (short === undefined) return;
    throw new InsufficientScopeError(`Forbidden: token lacks a scope of tool ${short}`, [...needs!], 'tool_scope');
  }
}

/** The tools `auth` holds to scopes; undefined for none, so a gateway without them reads no tool names. */
export function createToolScopes(auth: AuthOptions): ToolScopes | undefined {
  const listed = auth.toolScopes ?? {};
  return Object.keys(listed).length === 0 ? undefined : new ToolScopes(listed, auth.requiredScopes);
}
