// MCP authorization discovery through the gateway in auth mode `jwt`: an MCP
// client that meets a 401 finds, with the MCP SDK's own discovery functions,
// the gateway's OAuth 2.0 Protected Resource Metadata (RFC 9728) and from it
// the authorization server that issues its tokens (a stand-in serving RFC
// 8414 metadata on loopback).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  discoverOAuthProtectedResourceMetadata,
  discoverOAuthServerInfo,
  extractWWWAuthenticateParams,
  selectResourceURL,
  type OAuthClientProvider,
} from '@modelcontextprotocol/client';
import { createGateway } from '@switchyard/gateway';
import { AUDIENCE, ISSUER, startJwks, type Jwks } from './fixtures/jwks.ts';
import { jwtHarness } from './fixtures/jwt-harness.ts';
import { INITIALIZE, post, startHarness, stopServer, type Harness } from './harness.ts';

const METADATA = '/.well-known/oauth-protected-resource';

describe('OAuth protected resource metadata (auth mode jwt)', () => {
  let jwks: Jwks;
  let issuerServer: Server;
  let issuer: string;
  /** Resource from each request's Host; the authorization server is the issuer. */
  let derived: Harness;
  /** Resource, authorization servers and scopes configured, as behind an ingress. */
  let configured: Harness;
  before(async () => {
    jwks = await startJwks();
    // A stand-in authorization server: just its RFC 8414 metadata.
    issuerServer = createServer((req, res) => {
      if (req.url !== '/.well-known/oauth-authorization-server') return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          issuer,
          authorization_endpoint: `${issuer}/authorize`,
          token_endpoint: `${issuer}/token`,
          response_types_supported: ['code'],
          code_challenge_methods_supported: ['S256'],
        }),
      );
    });
    await new Promise<void>((resolve) => issuerServer.listen(0, '127.0.0.1', resolve));
    issuer = `http://127.0.0.1:${(issuerServer.address() as AddressInfo).port}`;
    derived = await startHarness(1, { auth: { mode: 'jwt', jwksUrl: jwks.url, issuer, audience: AUDIENCE } });
    configured = await startHarness(1, {
      auth: {
        mode: 'jwt',
        jwksUrl: jwks.url,
        issuer: ISSUER,
        resource: 'https://mcp.example.com/mcp',
        authorizationServers: ['https://login.example.com/tenant'],
        scopes: ['mcp:tools', 'offline_access'],
      },
    });
  });
  after(async () => {
    await Promise.all([derived?.close(), configured?.close()]);
    await jwks?.close();
    if (issuerServer) await stopServer(issuerServer);
  });

  it("names the metadata in a 401's challenge, which the SDK reads", async () => {
    const refused = await fetch(derived.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(INITIALIZE),
    });
    assert.equal(refused.status, 401);
    const origin = new URL(derived.url).origin;
    assert.equal(
      refused.headers.get('www-authenticate'),
      `Bearer realm="switchyard", resource_metadata="${origin}${METADATA}/mcp"`,
    );
    const params = extractWWWAuthenticateParams(refused);
    assert.equal(params.resourceMetadataUrl?.href, `${origin}${METADATA}/mcp`);
    assert.equal(params.error, undefined);
  });

  it('leads the SDK from the MCP URL to the authorization server, the path form of /mcp included', async () => {
    const info = await discoverOAuthServerInfo(derived.url);
    assert.equal(info.authorizationServerUrl, issuer);
    assert.deepEqual(info.resourceMetadata, {
      resource: derived.url,
      authorization_servers: [issuer],
      bearer_methods_supported: ['header'],
    });
    assert.equal(info.authorizationServerMetadata?.token_endpoint, `${issuer}/token`);
    // A client of /mcp/<class>/<process> asks tokens for the resource /mcp, which covers it.
    const pathForm = derived.url.replace(/\/mcp$/, '/mcp/demo/p1');
    const metadata = await discoverOAuthProtectedResourceMetadata(pathForm);
    const resource = await selectResourceURL(pathForm, {} as OAuthClientProvider, metadata);
    assert.equal(resource?.href, derived.url);
  });

  it('takes the scheme from X-Forwarded-Proto, as behind a TLS-ending ingress', async () => {
    const host = new URL(derived.url).host;
    const res = await fetch(`http://${host}${METADATA}/mcp`, { headers: { 'x-forwarded-proto': 'https' } });
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal(((await res.json()) as { resource: string }).resource, `https://${host}/mcp`);
  });

  it('serves the resource, authorization servers and scopes configured, and names the scopes in the challenge', async () => {
    const origin = new URL(configured.url).origin;
    for (const path of [METADATA, `${METADATA}/mcp`, `${METADATA}/mcp/demo/p1`]) {
      const res = await fetch(`${origin}${path}`);
      assert.equal(res.status, 200, path);
      assert.equal(res.headers.get('access-control-allow-origin'), '*');
      assert.deepEqual(await res.json(), {
        resource: 'https://mcp.example.com/mcp',
        authorization_servers: ['https://login.example.com/tenant'],
        bearer_methods_supported: ['header'],
        scopes_supported: ['mcp:tools', 'offline_access'],
      });
    }
    const invalid = await post(configured.url, INITIALIZE, {
      authorization: `Bearer ${await jwks.sign('u', 'other')}`,
    });
    assert.equal(invalid.status, 401);
    assert.equal(
      invalid.headers.get('www-authenticate'),
      'Bearer realm="switchyard", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", ' +
        'scope="mcp:tools offline_access", error="invalid_token", error_description="invalid token"',
    );
  });

  it('without auth.audience, accepts only tokens issued for the configured resource', async () => {
    const accepted = await post(configured.url, INITIALIZE, {
      authorization: `Bearer ${await jwks.sign('u', 'https://mcp.example.com/mcp')}`,
    });
    assert.equal(accepted.status, 200, JSON.stringify(accepted.json));
    const elsewhere = await post(configured.url, INITIALIZE, {
      authorization: `Bearer ${await jwks.sign('u', 'https://other.example.com/mcp')}`,
    });
    assert.equal(elsewhere.status, 401);
  });

  it('answers 404 for the metadata of another path, and 405 for a POST', async () => {
    const origin = new URL(derived.url).origin;
    assert.equal((await fetch(`${origin}${METADATA}/other`)).status, 404);
    assert.equal((await fetch(`${origin}${METADATA}/mcp`, { method: 'POST' })).status, 405);
  });
});

describe('OAuth protected resource metadata with auth.resource not written as a URL is served', () => {
  const h = jwtHarness({ issuer: ISSUER, resource: 'https://MCP.Example.com:443/mcp' });
  /** What the metadata, and so a client's token request (RFC 8707), names: the URL standard's form of it. */
  const CANONICAL = 'https://mcp.example.com/mcp';

  it('accepts tokens for the resource its metadata names, and for the resource as configured', async () => {
    const metadata = (await (await fetch(`${new URL(h.url).origin}${METADATA}/mcp`)).json()) as { resource: string };
    assert.equal(metadata.resource, CANONICAL);
    const asked = await selectResourceURL(CANONICAL, {} as OAuthClientProvider, metadata);
    assert.equal(asked?.href, CANONICAL, 'the resource an SDK client asks its token for');
    for (const audience of [CANONICAL, 'https://MCP.Example.com:443/mcp']) {
      const res = await post(h.url, INITIALIZE, { authorization: `Bearer ${await h.jwks.sign('u', audience)}` });
      assert.equal(res.status, 200, `aud ${audience}: ${JSON.stringify(res.json)}`);
    }
    const elsewhere = await post(h.url, INITIALIZE, {
      authorization: `Bearer ${await h.jwks.sign('u', 'https://other.example.com/mcp')}`,
    });
    assert.equal(elsewhere.status, 401);
  });
});

describe('OAuth protected resource metadata in other auth modes', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness(1, { auth: { mode: 'bearer', tokens: ['token-0123456789abcdef'] } });
  });
  after(() => h?.close());

  it('serves none (static tokens have no authorization server) and keeps the plain challenge', async () => {
    const origin = new URL(h.url).origin;
    assert.equal((await fetch(`${origin}${METADATA}/mcp`)).status, 404);
    const refused = await post(h.url, INITIALIZE);
    assert.equal(refused.headers.get('www-authenticate'), 'Bearer realm="switchyard"');
  });
});

describe('OAuth protected resource metadata options', () => {
  const jwt = { mode: 'jwt' as const, jwksUrl: 'https://login.example.com/jwks.json' };
  for (const [name, auth, says] of [
    ['a resource with a fragment', { ...jwt, resource: 'https://mcp.example.com/mcp#x' }, /auth\.resource/],
    ['a resource that is not http(s)', { ...jwt, resource: 'ftp://mcp.example.com/mcp' }, /auth\.resource/],
    ['an authorization server that is not a URL', { ...jwt, authorizationServers: ['login'] }, /login is not/],
    ['a scope with a quote', { ...jwt, scopes: ['a"b'] }, /a"b is not a scope token/],
  ] as const) {
    it(`refuses ${name}`, () => {
      assert.throws(() => createGateway({ schedulers: ['http://127.0.0.1:1'], auth }), says);
    });
  }
});
