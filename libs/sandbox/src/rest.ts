import { z } from 'zod';
import { ProtocolError, SdkError, SdkErrorCode } from '@modelcontextprotocol/client';
import { DEFAULT_CLASS, IDENTITY_HEADERS, SwitchyardError, isIdentityValue, parseWith } from '@switchyard/protocol';
import type { SandboxRegistry, Sandbox } from './registry.ts';
import type { SessionTable } from './sessions.ts';
import { UPSTREAM_TIMEOUT_MS } from './proxy.ts';
import type { ToolCallCounting } from './tool-calls.ts';
import { callSandboxTool } from './toolcall.ts';
import { responseForError, readJson } from './wire.ts';

const toolCallSchema = z.strictObject({
  name: z.string().min(1).max(256),
  arguments: z.record(z.string(), z.unknown()).default({}),
});

const createSchema = z.strictObject({ class: z.string().optional() }).default({});

export interface RestDeps {
  readonly registry: SandboxRegistry;
  readonly sessions: SessionTable;
  readonly defaultClass: string | undefined;
  /** Where tool calls are counted, as those over MCP are; none when undefined. */
  readonly toolCalls: ToolCallCounting | undefined;
}

function describe(sandbox: Sandbox): object {
  return { id: sandbox.id, class: sandbox.className, refs: sandbox.refs, dead: sandbox.instance.dead };
}

function notFound(what: string): never {
  throw new SwitchyardError('not_found', `${what} not found`);
}

/**
 * A body is JSON by its Content-Type too, not only by what it holds: a page of
 * another site can make a browser POST `text/plain` (or a form) without asking
 * first, and a browser holding a scheduler's Basic credentials (its live page)
 * would send them along through `/api/proxy`. A JSON Content-Type needs the
 * CORS preflight no scheduler or runtime answers.
 */
function requireJson(request: Request): void {
  const type = request.headers.get('content-type')?.split(';', 1)[0]?.trim().toLowerCase();
  if (type !== 'application/json' && !type?.endsWith('+json')) {
    throw new SwitchyardError('unsupported_media_type', 'Content-Type must be application/json');
  }
}

async function parseBody<S extends z.ZodType>(request: Request, schema: S): Promise<z.output<S>> {
  const text = await request.clone().text();
  if (text.length > 0) requireJson(request);
  const parsed = parseWith(schema, text.length === 0 ? undefined : await readJson(request));
  if (!parsed.ok) throw new SwitchyardError('invalid_request', parsed.error);
  return parsed.value;
}

/**
 * REST parity for non-MCP callers: `GET /weight`, `GET|POST|DELETE
 * /sandboxes/:id`, `POST /sandboxes/:id/toolcall`, `POST
 * /sessions/:session/toolcall`. Errors are JSON-RPC error bodies with the
 * registry's HTTP status. A tool call may run for 10 min (UPSTREAM_TIMEOUT_MS,
 * as over MCP to a proxied server); past that it is answered 504
 * (`upstream_timeout`).
 */
export function restFetch(deps: RestDeps): (request: Request) => Promise<Response> {
  return async (request) => {
    try {
      return await route(deps, request);
    } catch (error) {
      return responseForError(error);
    }
  };
}

async function route(deps: RestDeps, request: Request): Promise<Response> {
  const { registry, sessions } = deps;
  const parts = new URL(request.url).pathname.split('/').filter(Boolean).map(decodePart);
  const m = request.method;
  if (parts.length === 1 && parts[0] === 'weight' && m === 'GET') return Response.json(registry.idleWeight());
  if (parts[0] === 'sandboxes' && parts.length >= 2) {
    const id = parts[1]!;
    if (!isIdentityValue(id))
      throw new SwitchyardError('bad_identity', 'sandbox id: must be 1-128 characters from [A-Za-z0-9._:@-]');
    if (parts.length === 2 && m === 'GET')
      return Response.json(describe(registry.get(id) ?? notFound(`sandbox "${id}"`)));
    if (parts.length === 2 && m === 'DELETE') {
      if (!(await registry.destroy(id, 'deleted'))) notFound(`sandbox "${id}"`);
      return new Response(null, { status: 204 });
    }
    if (parts.length === 2 && m === 'POST') {
      const body = await parseBody(request, createSchema);
      const className = body.class ?? request.headers.get(IDENTITY_HEADERS.class) ?? deps.defaultClass ?? DEFAULT_CLASS;
      const sandbox = await registry.acquire(className, id, { forgiveDeath: true });
      // Created for later sessions: hold no reference, so it expires unless used.
      registry.release(sandbox);
      return Response.json(describe(sandbox), { status: 201 });
    }
    if (parts.length === 3 && parts[2] === 'toolcall' && m === 'POST') {
      const sandbox = registry.get(id) ?? notFound(`sandbox "${id}"`);
      return toolCall(deps, sandbox, request);
    }
  }
  if (parts[0] === 'sessions' && parts.length === 3 && parts[2] === 'toolcall' && m === 'POST') {
    const session = sessions.get(parts[1]!) ?? notFound('session');
    return toolCall(deps, session.sandbox, request);
  }
  throw new SwitchyardError('not_found', `no route for ${m} ${new URL(request.url).pathname}`);
}

function decodePart(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch (error) {
    throw new SwitchyardError('invalid_request', 'path is not valid percent-encoding', { cause: error });
  }
}

/** JSON-RPC errors a sandbox answers a call with that are the caller's: passed on as such, not as internal failures. */
const CALLER_ERRORS = new Map<number, 'invalid_params' | 'invalid_request' | 'not_found'>([
  [-32602, 'invalid_params'],
  [-32600, 'invalid_request'],
  [-32601, 'not_found'],
]);

async function toolCall(deps: RestDeps, sandbox: Sandbox, request: Request): Promise<Response> {
  const { registry } = deps;
  requireJson(request);
  const { name, arguments: args } = await parseBody(request, toolCallSchema);
  // Hold a reference for the call so expiry cannot pull the sandbox away mid-call.
  const held = await registry.acquire(sandbox.className, sandbox.id);
  try {
    return Response.json(await callSandboxTool(held, deps.toolCalls, name, args, request.signal));
  } catch (error) {
    const code = error instanceof ProtocolError ? CALLER_ERRORS.get(error.code) : undefined;
    if (code) throw new SwitchyardError(code, (error as ProtocolError).message, { cause: error });
    if (error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout) {
      throw new SwitchyardError('upstream_timeout', `tool call timed out after ${UPSTREAM_TIMEOUT_MS / 60_000} min`, {
        cause: error,
      });
    }
    throw error;
  } finally {
    registry.release(held);
  }
}
