// auth.classScopes at run time: the scopes a request served by each listed
// class needs, and the class a legacy session was opened to, which its id
// carries.
import { createHash } from 'node:crypto';
import { SwitchyardError } from '@switchyard/protocol';
import { InsufficientScopeError } from './challenge.ts';
import { lacksAny } from './jwt-claims.ts';
import type { AuthOptions } from './options.ts';

/** Hex digits of a class's tag: 64 bits of its SHA-256. */
const TAG_HEX = 16;
/** A session id this gateway mints with classes held to scopes: a 128-bit random id (randomId), `.`, the tag. */
const TAGGED_SESSION_ID = /^[0-9a-f]{32}\.([0-9a-f]{16})$/;

function tagOf(cls: string): string {
  return createHash('sha256').update(cls).digest('hex').slice(0, TAG_HEX);
}

/**
 * Which class serves a request, and whether its token may reach it. A
 * legacy session is served by the class it was opened to, whatever its
 * later requests name (a runtime keeps a session on the sandbox it opened
 * it on), and no part of the gateway holds that class for sure: a route
 * cache entry is evicted, or held by another replica, or in no Redis at
 * all, and the scheduler knows a session's runtime, not its class. So the
 * session's id says it: the gateway mints `<random>.<tag of the class>`,
 * having checked the class at `initialize`, and a client cannot change the
 * tag without naming a session no runtime holds (ids are the gateway's to
 * mint: clients' X-Switchyard-Session-Id is stripped). The tag is a hash,
 * so any replica reads it with no state, and so an id says nothing more
 * than the class its client named. A tag that is not a listed class's is a
 * class not held to scopes; two classes sharing a tag (64 bits) would each
 * be held to the scopes of a listed one, never to fewer.
 */
export class ClassScopes {
  /** Listed class → the scopes a request of it needs: auth.requiredScopes, then the class's own. */
  readonly #needs = new Map<string, readonly string[]>();
  /** Tag → listed class. */
  readonly #byTag = new Map<string, string>();

  constructor(classScopes: Readonly<Record<string, readonly string[]>>, requiredScopes: readonly string[] = []) {
    for (const [cls, scopes] of Object.entries(classScopes)) {
      this.#needs.set(cls, [...new Set([...requiredScopes, ...scopes])]);
      this.#byTag.set(tagOf(cls), cls);
    }
  }

  /** The id of a session of class `cls`, made of `minted` (a randomId). */
  sessionId(minted: string, cls: string): string {
    return `${minted}.${tagOf(cls)}`;
  }

  /** The scopes a request served by `cls` needs (auth.requiredScopes first), or none when it is not listed. */
  needs(cls: string): readonly string[] {
    return this.#needs.get(cls) ?? [];
  }

  /**
   * Throws InsufficientScopeError (403) when `cls` is listed and `granted`
   * lacks one of its scopes, naming them and then `alsoNeeded` (what else
   * the request needs: the scopes of the tools it calls), so that one
   * step-up admits the request; passes any other class.
   */
  admit(cls: string, granted: ReadonlySet<string> | undefined, alsoNeeded: readonly string[] = []): void {
    const needs = this.#needs.get(cls);
    if (needs === undefined || (granted !== undefined && !lacksAny(granted, needs))) return;
    const named = [...new Set([...needs, ...alsoNeeded])];
    throw new InsufficientScopeError(`Forbidden: token lacks a scope of class ${cls}`, named, 'class_scope');
  }

  /**
   * The listed class session `sessionId` was opened to, or undefined for
   * one not listed. An id without a tag was minted by a gateway that did
   * not hold classes to scopes, or made up: its class is unknown, and it is
   * answered as a lost session (404), which a client opens again.
   */
  sessionClass(sessionId: string): string | undefined {
    const tag = TAGGED_SESSION_ID.exec(sessionId)?.[1];
    if (tag === undefined) {
      throw new SwitchyardError('session_not_found', 'Session not found: opened without a class tag; re-initialize');
    }
    return this.#byTag.get(tag);
  }
}

/** The classes `auth` holds to scopes; undefined for none, so a gateway without them spends nothing on it. */
export function createClassScopes(auth: AuthOptions): ClassScopes | undefined {
  const listed = auth.classScopes ?? {};
  return Object.keys(listed).length === 0 ? undefined : new ClassScopes(listed, auth.requiredScopes);
}
