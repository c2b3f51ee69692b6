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

  /** The scopes of every listed tool among `tools`, each once; none when no listed tool is among them. */
  needs(tools: readonly string[]): readonly string[] {
    const needs = new Set<string>();
    for (const tool of tools) for (const scope of this.#needs.get(tool) ?? []) needs.add(scope);
    return [...needs];
  }

  /**
   * Throws InsufficientScopeError (403, `tool_scope`) when `granted` lacks a
   * scope of a listed tool among `tools` (the tools a body calls, every call
   * of a batch): named after the first such tool, the challenge names
   * `alsoNeeded` (what else the request needs: the scopes of the class
   * serving it) and then the scopes of every listed tool, so that one
   * step-up admits the whole request. Passes any other tool.
   */
  admit(tools: readonly string[], granted: ReadonlySet<string> | undefined, alsoNeeded: readonly string[] = []): void {
    const short = tools.find((tool) => {
      const scopes = this.#needs.get(tool);
      return scopes !== undefined && (granted === undefined || lacksAny(granted, scopes));
    });
    if (short === undefined) return;
    const named = [...new Set([...alsoNeeded, ...this.needs(tools)])];
    throw new InsufficientScopeError(`Forbidden: token lacks a scope of tool ${short}`, named, 'tool_scope');
  }
}

/** The tools `auth` holds to scopes; undefined for none, so a gateway without them reads no tool names. */
export function createToolScopes(auth: AuthOptions): ToolScopes | undefined {
  const listed = auth.toolScopes ?? {};
  return Object.keys(listed).length === 0 ? undefined : new ToolScopes(listed, auth.requiredScopes);
}
