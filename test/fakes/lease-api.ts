// A fake of the Kubernetes Lease REST API (coordination.k8s.io/v1) on a real
// HTTP server. It exists because no API server can run in CI here (no
// Kubernetes, no Docker), yet the Kubernetes lease lock and the scheduler
// cluster must be tested through the REAL @kubernetes/client-node, over HTTP,
// with the server behaviours that matter for election: resourceVersion
// optimistic concurrency (409 Conflict), duplicate create (409
// AlreadyExists), 404 as a `Status`, strict MicroTime decoding, and injected
// faults (500s, delay, 409 storms). Run it as a separate process with
// `node test/fakes/lease-api.ts [--port=N]`: it prints its URL on stdout,
// and SIGTERM stops it. Out of process, drive faults over HTTP:
// `POST /fake/faults {failNext?, failStatus?, conflictNext?, delayMs?}`,
// `POST /fake/reset`, `GET /fake/requests` (these are never faulted or logged).
//
// MicroTime: the real server decodes spec.acquireTime/renewTime with Go's
// RFC3339Micro layout, which demands exactly six fractional digits, so a
// plain JS `Date` (three digits) fails to decode. The fake answers such a
// body with 400 BadRequest, as a decode failure is answered.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

const GROUP_VERSION = 'coordination.k8s.io/v1';
const LEASE_PATH =
  /^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/([a-z0-9.-]{1,253})\/leases(?:\/([a-z0-9.-]{1,253}))?$/;
const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$/;
const BODY_BYTES_MAX = 1024 * 1024;
const STATUS_REASONS: Record<number, string> = {
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

export interface FakeLeaseApiOptions {
  /** Default 0 (any free port). Always binds 127.0.0.1. */
  readonly port?: number;
  /** Oldest entries are dropped past this. Default 1000. */
  readonly requestLogMax?: number;
  /** Creates beyond this are refused with 403 (quota). Default 1000. */
  readonly leasesMax?: number;
}

export interface RequestLogEntry {
  readonly method: string;
  readonly path: string;
  readonly status: number;
  readonly atMs: number;
}

/** Faults apply to Lease API requests only, never to the `/fake/*` control endpoints. */
export interface FaultSettings {
  /** The next N requests answer this status (`failStatus`, default 500) without touching the store. */
  failNext?: number;
  failStatus?: number;
  /** The next N writes (POST/PUT/DELETE) answer 409 Conflict. */
  conflictNext?: number;
  /** Every request waits this long before it is served. */
  delayMs?: number;
}

export interface FakeLeaseApi {
  /** `http://127.0.0.1:<port>` — the `server` of a kubeconfig cluster. */
  readonly url: string;
  /** Adds to the fault settings (counts replace, unset fields stay). */
  setFaults(faults: FaultSettings): void;
  /** Clears faults and the request log (not the leases). */
  resetFaults(): void;
  /** Lease API requests served, oldest first. */
  requests(): readonly RequestLogEntry[];
  /** The stored Lease object, as the API would return it. */
  lease(namespace: string, name: string): Lease | undefined;
  /** Idempotent. */
  close(): Promise<void>;
}

type Json = Record<string, unknown>;

/** A stored Lease as the API returns it (times are MicroTime strings). */
export interface FakeLease {
  readonly apiVersion: string;
  readonly kind: 'Lease';
  readonly metadata: Json & {
    readonly name: string;
    readonly namespace: string;
    readonly resourceVersion: string;
    readonly uid?: string;
    readonly creationTimestamp?: string;
  };
  readonly spec: {
    readonly holderIdentity?: string;
    readonly leaseDurationSeconds?: number;
    readonly acquireTime?: string;
    readonly renewTime?: string;
    readonly leaseTransitions?: number;
  };
}
type Lease = FakeLease;

class HttpError extends Error {
  readonly status: number;
  readonly reason: string;
  constructor(status: number, reason: string, message: string) {
    super(message);
    this.status = status;
    this.reason = reason;
  }
}

export async function startFakeLeaseApi(options: FakeLeaseApiOptions = {}): Promise<FakeLeaseApi> {
  const requestLogMax = options.requestLogMax ?? 1000;
  const leasesMax = options.leasesMax ?? 1000;
  const leases = new Map<string, Lease>();
  const log: RequestLogEntry[] = [];
  let faults: Required<FaultSettings> = { failNext: 0, failStatus: 500, conflictNext: 0, delayMs: 0 };
  let revision = 0;

  const server = createServer((req, res) => {
    serve(req, res).catch((error: unknown) => {
      const status = error instanceof HttpError ? error.status : 500;
      const reason = error instanceof HttpError ? error.reason : 'InternalError';
      sendStatus(res, status, reason, error instanceof Error ? error.message : String(error));
    });
  });

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    if (path.startsWith('/fake/')) return control(req, res, path);
    const method = req.method ?? 'GET';
    res.on('finish', () => record({ method, path, status: res.statusCode, atMs: Date.now() }));
    const body = await readBody(req);
    // Unref: a delayed request must not keep a test process alive after close().
    if (faults.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, faults.delayMs).unref());
    if (faults.failNext > 0) {
      faults.failNext -= 1;
      throw new HttpError(faults.failStatus, STATUS_REASONS[faults.failStatus] ?? 'InternalError', 'injected failure');
    }
    const match = LEASE_PATH.exec(path);
    if (!match) throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${path})`);
    const namespace = match[1]!;
    const name = match[2];
    const isWrite = method === 'POST' || method === 'PUT' || method === 'DELETE';
    if (isWrite && faults.conflictNext > 0) {
      faults.conflictNext -= 1;
      throw conflict(name ?? '');
    }
    if (name === undefined && method === 'GET') return sendJson(res, 200, list(namespace));
    if (name === undefined && method === 'POST') return sendJson(res, 201, create(namespace, parse(body)));
    if (name !== undefined && method === 'GET') return sendJson(res, 200, read(namespace, name));
    if (name !== undefined && method === 'PUT') return sendJson(res, 200, replace(namespace, name, parse(body)));
    if (name !== undefined && method === 'DELETE') {
      read(namespace, name);
      leases.delete(key(namespace, name));
      return sendStatus(res, 200, '', 'deleted', 'Success');
    }
    throw new HttpError(405, 'MethodNotAllowed', `method ${method} is not supported on ${path}`);
  }

  function list(namespace: string): Json {
    const items = [...leases.values()].filter((l) => l.metadata.namespace === namespace);
    return { apiVersion: GROUP_VERSION, kind: 'LeaseList', metadata: { resourceVersion: String(revision) }, items };
  }

  function read(namespace: string, name: string): Lease {
    const found = leases.get(key(namespace, name));
    if (!found) throw new HttpError(404, 'NotFound', `leases.coordination.k8s.io "${name}" not found`);
    return found;
  }

  function create(namespace: string, body: Json): Lease {
    const meta = validate(namespace, body);
    if (leases.has(key(namespace, meta.name))) {
      throw new HttpError(409, 'AlreadyExists', `leases.coordination.k8s.io "${meta.name}" already exists`);
    }
    if (leases.size >= leasesMax) throw new HttpError(403, 'Forbidden', `exceeded quota: at most ${leasesMax} leases`);
    const metadata = {
      ...meta.raw,
      uid: randomUUID(),
      creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    };
    return store(namespace, meta.name, body, metadata);
  }

  function replace(namespace: string, name: string, body: Json): Lease {
    const meta = validate(namespace, body);
    if (meta.name !== name) throw new HttpError(400, 'BadRequest', 'the name of the object does not match the URL');
    const current = read(namespace, name);
    const wanted = meta.raw.resourceVersion;
    if (wanted !== undefined && wanted !== current.metadata.resourceVersion) throw conflict(name);
    const { uid, creationTimestamp } = current.metadata;
    return store(namespace, name, body, { ...meta.raw, uid, creationTimestamp });
  }

  function store(namespace: string, name: string, body: Json, metadata: Json): Lease {
    revision += 1;
    const lease: Lease = {
      apiVersion: GROUP_VERSION,
      kind: 'Lease',
      metadata: { ...metadata, name, namespace, resourceVersion: String(revision) },
      spec: (body.spec ?? {}) as FakeLease['spec'],
    };
    leases.set(key(namespace, name), lease);
    return lease;
  }

  async function control(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    if (path === '/fake/requests' && req.method === 'GET') return sendJson(res, 200, { items: log });
    if (path === '/fake/faults' && req.method === 'POST') {
      api.setFaults(parse(await readBody(req)) as FaultSettings);
      return sendJson(res, 200, faults);
    }
    if (path === '/fake/reset' && req.method === 'POST') {
      api.resetFaults();
      return sendJson(res, 200, faults);
    }
    throw new HttpError(404, 'NotFound', `no control endpoint ${req.method} ${path}`);
  }

  function record(entry: RequestLogEntry): void {
    log.push(entry);
    if (log.length > requestLogMax) log.splice(0, log.length - requestLogMax);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;

  const api: FakeLeaseApi = {
    url: `http://127.0.0.1:${port}`,
    setFaults(next) {
      faults = { ...faults, ...definedCounts(next) };
    },
    resetFaults() {
      faults = { failNext: 0, failStatus: 500, conflictNext: 0, delayMs: 0 };
      log.length = 0;
    },
    requests: () => [...log],
    lease: (namespace, name) => leases.get(key(namespace, name)),
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
  return api;
}

function definedCounts(input: FaultSettings): Partial<Required<FaultSettings>> {
  const out: Partial<Required<FaultSettings>> = {};
  for (const field of ['failNext', 'failStatus', 'conflictNext', 'delayMs'] as const) {
    const value = input[field];
    if (value === undefined) continue;
    if (!Number.isInteger(value) || value < 0)
      throw new HttpError(400, 'BadRequest', `${field} must be an integer >= 0`);
    out[field] = value;
  }
  return out;
}

function key(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

function conflict(name: string): HttpError {
  return new HttpError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on leases.coordination.k8s.io "${name}": the object has been modified; please apply your changes to the latest version and try again`,
  );
}

/** Checks what the real server checks on decode (400) and validation (422); returns the metadata. */
function validate(namespace: string, body: Json): { name: string; raw: Json & { resourceVersion?: string } } {
  if (body.kind !== undefined && body.kind !== 'Lease')
    throw new HttpError(400, 'BadRequest', `kind ${String(body.kind)} is not Lease`);
  const raw = (body.metadata ?? {}) as Json & { resourceVersion?: string };
  if (raw.namespace !== undefined && raw.namespace !== namespace) {
    throw new HttpError(
      400,
      'BadRequest',
      'the namespace of the provided object does not match the namespace sent on the request',
    );
  }
  if (typeof raw.name !== 'string' || raw.name === '')
    throw new HttpError(422, 'Invalid', 'metadata.name: Required value');
  const spec = (body.spec ?? {}) as Json;
  for (const field of ['acquireTime', 'renewTime']) {
    const value = spec[field];
    if (value !== undefined && value !== null && !(typeof value === 'string' && MICRO_TIME.test(value))) {
      throw new HttpError(
        400,
        'BadRequest',
        `spec.${field}: cannot parse ${JSON.stringify(value)} as RFC3339 with microseconds`,
      );
    }
  }
  for (const field of ['leaseDurationSeconds', 'leaseTransitions']) {
    const value = spec[field];
    if (value === undefined || value === null) continue;
    const min = field === 'leaseDurationSeconds' ? 1 : 0;
    if (!Number.isInteger(value) || (value as number) < min) {
      throw new HttpError(
        422,
        'Invalid',
        `spec.${field}: Invalid value: ${JSON.stringify(value)}: must be an integer >= ${min}`,
      );
    }
  }
  return { name: raw.name, raw };
}

function parse(body: string): Json {
  try {
    const value: unknown = JSON.parse(body === '' ? '{}' : body);
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) return value as Json;
  } catch {
    // answered below
  }
  throw new HttpError(400, 'BadRequest', 'the body is not a JSON object');
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > BODY_BYTES_MAX) throw new HttpError(413, 'RequestEntityTooLarge', 'request body too large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** A Kubernetes `Status` body, as the API server answers errors (and deletes). */
function sendStatus(res: ServerResponse, code: number, reason: string, message: string, status = 'Failure'): void {
  if (res.headersSent) return void res.destroy();
  sendJson(res, code, { kind: 'Status', apiVersion: 'v1', metadata: {}, status, message, reason, code });
}

if (import.meta.main) {
  const portArg = process.argv.find((arg) => arg.startsWith('--port='));
  const api = await startFakeLeaseApi({ port: portArg ? Number(portArg.slice('--port='.length)) : 0 });
  process.stdout.write(`${api.url}\n`);
  const shutdown = (): void => void api.close().then(() => process.exit(0));
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}
