import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorParams, type Refusal } from './challenge.ts';
import type { AuthOptions } from './options.ts';

/** RFC 9728's well-known path; the document for `/mcp` sits at this plus `/mcp`. */
export const METADATA_PATH = '/.well-known/oauth-protected-resource';
const MCP = '/mcp';
/** A Host header fit to name a resource: a host name or IP literal, an optional port. */
const HOST = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/**
 * The gateway as an OAuth 2.0 protected resource (MCP authorization, RFC
 * 9728), in auth mode `jwt`: it serves the metadata that tells an MCP client
 * which authorization servers issue its tokens, and names that document in
 * the challenge of every 401, so a client that meets the gateway without a
 * token can go and get one. The resource is the canonical URL of `/mcp`:
 * `auth.resource` when set (behind an ingress, the URL clients use);
 * otherwise built per request from `Host` and `X-Forwarded-Proto`.
 */
export class ProtectedResource {
  readonly #resource: URL | undefined;
  readonly #servers: readonly string[];
  readonly #scopes: readonly string[];
  readonly #supported: readonly string[];

  /** `scopes` are named in challenges, `supportedScopes` (default `scopes`) in the metadata. */
  constructor(options: {
    resource?: string;
    authorizationServers: readonly string[];
    scopes?: readonly string[];
    supportedScopes?: readonly string[];
  }) {
    this.#resource = options.resource === undefined ? undefined : new URL(options.resource);
    this.#servers = options.authorizationServers;
    this.#scopes = options.scopes ?? [];
    this.#supported = options.supportedScopes ?? this.#scopes;
  }

  /**
   * The `WWW-Authenticate` value of a 401 or 403 (RFC 6750, RFC 9728 §5.1):
   * the scopes to ask for are the refusal's, else those configured.
   */
  challenge(req: IncomingMessage, refusal?: Refusal): string {
    const resource = this.#resourceOf(req);
    const parts = ['Bearer realm="switchyard"'];
    if (resource) parts.push(`resource_metadata="${metadataUrl(resource)}"`);
    const scope = refusal?.scope ?? this.#scopes.join(' ');
    if (scope !== '') parts.push(`scope="${scope}"`);
    return parts.join(', ') + errorParams(refusal);
  }

  /** Answers a request for the metadata document; false for any other path. */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    if (!req.url?.startsWith(METADATA_PATH)) return false;
    const path = req.url.split('?', 1)[0]!;
    if (path !== METADATA_PATH && !path.startsWith(`${METADATA_PATH}/`)) return false;
    // The document for `/mcp` covers its path form `/mcp/<class>/<process>` too (a resource is a URL prefix).
    const suffix = path.slice(METADATA_PATH.length);
    const resource = this.#resourceOf(req);
    const known = suffix === '' || suffix === MCP || suffix.startsWith(`${MCP}/`);
    if (!known || !resource) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      return true;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'application/json' });
      res.end('{"error":"method not allowed"}');
      return true;
    }
    const body = JSON.stringify({
      resource: resource.href,
      authorization_servers: this.#servers,
      bearer_methods_supported: ['header'],
      ...(this.#supported.length > 0 ? { scopes_supported: this.#supported } : {}),
    });
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      // A public document that browser-based clients read from any origin.
      'access-control-allow-origin': '*',
      // Built from this request's Host unless configured: not for shared caches then.
      'cache-control': this.#resource ? 'public, max-age=3600' : 'no-store',
    });
    res.end(req.method === 'HEAD' ? undefined : body);
    return true;
  }

  #resourceOf(req: IncomingMessage): URL | undefined {
    if (this.#resource) return this.#resource;
    const host = req.headers.host;
    if (host === undefined || !HOST.test(host)) return undefined;
    const forwarded = String(req.headers['x-forwarded-proto'] ?? '')
      .split(',', 1)[0]!
      .trim()
      .toLowerCase();
    // The pattern lets through what no URL takes (a port past 65535, an IPv4 address out of range).
    const url = `${forwarded === 'https' ? 'https' : 'http'}://${host}${MCP}`;
    return URL.canParse(url) ? new URL(url) : undefined;
  }
}

/** Where the metadata of `resource` is: the well-known path inserted before the resource's path (RFC 9728 §3.1). */
function metadataUrl(resource: URL): string {
  const path = resource.pathname === '/' ? '' : resource.pathname;
  return `${resource.origin}${METADATA_PATH}${path}`;
}

/**
 * The protected resource of auth mode `jwt`, when it names an authorization
 * server (`auth.authorizationServers`, else the token issuer when that is a
 * URL); undefined otherwise, and in the other modes, which have none.
 */
export function createProtectedResource(auth: AuthOptions): ProtectedResource | undefined {
  if (auth.mode !== 'jwt') return undefined;
  const servers = auth.authorizationServers ?? (auth.issuer && URL.canParse(auth.issuer) ? [auth.issuer] : []);
  if (servers.length === 0) return undefined;
  // Clients ask for what they are told: the scopes required, at least.
  const scopes = auth.scopes ?? auth.requiredScopes;
  // The metadata lists the classes' and tools' scopes too (RFC 9728: those used to reach the resource). A
  // 401 does not name them: a client that asked for all of them would be refused by a server that grants
  // it not every class or tool; a request of a class or tool asks for its own, by the 403 it gets (step-up).
  const stepUp = [...Object.values(auth.classScopes ?? {}), ...Object.values(auth.toolScopes ?? {})].flat();
  const supported = auth.scopes ?? (stepUp.length > 0 ? [...new Set([...(scopes ?? []), ...stepUp])] : undefined);
  return new ProtectedResource({
    authorizationServers: servers,
    ...(auth.resource !== undefined ? { resource: auth.resource } : {}),
    ...(scopes !== undefined ? { scopes } : {}),
    ...(supported !== undefined ? { supportedScopes: supported } : {}),
  });
}
