import { SwitchyardError, isIdentityValue, parseWith, metadataSchema, weightSchema } from '@switchyard/protocol';
import type { AnyRequest, AnyResponse, RequestHandler } from './http.ts';
import { readBody, sendError, sendJson } from './http.ts';
import type { RuntimeStateStore } from './store.ts';

export interface SidecarHandlerOptions {
  /** Largest request body accepted; more is a 413. Default 64 KiB. */
  readonly bodyBytesMax?: number;
}

/** Defaults of `createSidecarHandler`. */
export const SIDECAR_DEFAULTS = { bodyBytesMax: 64 * 1024 } as const;

type Params = Readonly<Record<string, string>>;
type Action = (store: RuntimeStateStore, params: Params, req: AnyRequest, bodyBytesMax: number) => Promise<unknown>;

interface Route {
  readonly pattern: readonly string[];
  readonly methods: Readonly<Record<string, Action>>;
}

const ROUTES: readonly Route[] = [
  {
    pattern: ['processes', ':pid'],
    methods: {
      POST: async (store, p) => void store.addProcess(p.pid!),
      DELETE: async (store, p) => void store.removeProcess(p.pid!),
    },
  },
  {
    pattern: ['processes', ':pid', 'threads', ':tid'],
    methods: {
      POST: async (store, p) => void store.addThread(p.pid!, p.tid!),
      DELETE: async (store, p) => void store.removeThread(p.pid!, p.tid!),
    },
  },
  {
    pattern: ['weight'],
    methods: {
      PUT: async (store, _p, req, max) => void store.setIdleWeight(await readJson(req, max, weightSchema, 'weight')),
    },
  },
  {
    pattern: ['metadata'],
    methods: {
      PUT: async (store, _p, req, max) => void store.setMetadata(await readJson(req, max, metadataSchema, 'metadata')),
    },
  },
  { pattern: ['drain'], methods: { POST: async (store) => void store.drain() } },
  { pattern: ['state'], methods: { GET: async (store) => store.snapshot() } },
];

/**
 * The runtime sidecar API, for runtimes not written in TypeScript. Bind its
 * server to 127.0.0.1 only: it has no authentication, and anyone who reaches
 * it can rewrite what the scheduler believes about this runtime.
 *
 * `POST|DELETE /processes/:pid`, `POST|DELETE /processes/:pid/threads/:tid`,
 * `PUT /weight` (`{dimension: number}`), `PUT /metadata` (`{key: string}`),
 * `POST /drain` (no new sandboxes from now on: `RuntimeStateStore.drain`) →
 * 204; `GET /state` → 200 with the snapshot. Errors are `{error}` JSON: a bad
 * identity value is a 400 naming `pid` or `tid`, malformed JSON a 400, a body
 * over `bodyBytesMax` a 413, an unknown path a 404, a wrong method a 405.
 * Mutations are idempotent, so a client may retry any of them.
 */
export function createSidecarHandler(store: RuntimeStateStore, options: SidecarHandlerOptions = {}): RequestHandler {
  const bodyBytesMax = options.bodyBytesMax ?? SIDECAR_DEFAULTS.bodyBytesMax;
  return (req: AnyRequest, res: AnyResponse): void => {
    void serve(store, bodyBytesMax, req, res).catch((error: unknown) => sendError(res, error));
  };
}

async function serve(store: RuntimeStateStore, bodyBytesMax: number, req: AnyRequest, res: AnyResponse): Promise<void> {
  const match = matchRoute(pathSegments(req.url ?? '/'));
  if (!match) throw new SwitchyardError('not_found', 'no such route');
  const action = match.route.methods[req.method ?? ''];
  if (!action) {
    const allow = Object.keys(match.route.methods).join(', ');
    return sendError(res, new SwitchyardError('method_not_allowed', `use ${allow}`), { allow });
  }
  const result = await action(store, match.params, req, bodyBytesMax);
  if (result === undefined) {
    res.statusCode = 204;
    res.end();
  } else sendJson(res, 200, result);
}

function pathSegments(url: string): string[] {
  const path = url.split('?', 1)[0]!;
  return path.split('/').filter((s) => s !== '');
}

function matchRoute(segments: readonly string[]): { route: Route; params: Params } | undefined {
  for (const route of ROUTES) {
    if (route.pattern.length !== segments.length) continue;
    const params: Record<string, string> = {};
    const ok = route.pattern.every((part, i) => {
      if (!part.startsWith(':')) return part === segments[i];
      params[part.slice(1)] = decodeParam(part.slice(1), segments[i]!);
      return true;
    });
    if (ok) return { route, params };
  }
  return undefined;
}

function decodeParam(name: string, raw: string): string {
  let value: string;
  try {
    value = decodeURIComponent(raw);
  } catch {
    value = raw;
  }
  if (!isIdentityValue(value)) {
    throw new SwitchyardError('bad_identity', `${name}: must be 1-128 characters from [A-Za-z0-9._:@-]`);
  }
  return value;
}

async function readJson<T>(
  req: AnyRequest,
  bytesMax: number,
  schema: Parameters<typeof parseWith>[0],
  what: string,
): Promise<T> {
  const body = await readBody(req, bytesMax);
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    throw new SwitchyardError('parse_error', `${what}: body is not JSON`);
  }
  const parsed = parseWith(schema, json);
  if (!parsed.ok) throw new SwitchyardError('invalid_request', `${what}: ${parsed.error}`);
  return parsed.value as T;
}
