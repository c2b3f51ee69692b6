import type * as K8s from '@kubernetes/client-node';
import type { ConfigurationOptions, KubeConfig, ObservableMiddleware, V1Lease } from '@kubernetes/client-node';
import { SwitchyardError } from '@switchyard/protocol';
import { LeaseConflictError } from './errors.ts';
import type { LeaseLock, LeaseRecord } from './lock.ts';

export interface KubernetesLockOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  /** Name of the `coordination.k8s.io/v1` Lease object. */
  readonly name: string;
  /**
   * Each HTTP request is aborted after this long (wall time), so a hung API
   * server cannot pile up requests that the elector already gave up on.
   * Default 5000 (5 s).
   */
  readonly requestTimeoutMs?: number;
}

/**
 * A `LeaseLock` over a Kubernetes `coordination.k8s.io/v1` Lease.
 *
 * Guarantees: 404 on read is "no lease" (`undefined`); 409 on create or
 * replace is `LeaseConflictError`; times are written as `V1MicroTime` (six
 * fractional digits, which the API server requires). Any other failure is a
 * `SwitchyardError(upstream_unavailable)` with the client's error as cause.
 * Not guaranteed: labels or annotations set by others survive an update —
 * `replace` writes the whole object.
 */
export function createKubernetesLock(options: KubernetesLockOptions): LeaseLock {
  const { namespace, name } = options;
  const where = `kubernetes:${namespace}/${name}`;
  const requestTimeoutMs = options.requestTimeoutMs ?? 5_000;
  // Appended, so the client's own middleware (user agent) still runs.
  // The object-style API runs observable middleware (the library's own stub, not rxjs).
  const perRequest = (k8s: typeof K8s): ConfigurationOptions<ObservableMiddleware> => ({
    middlewareMergeStrategy: 'append',
    middleware: [
      {
        pre: (context) => {
          context.setSignal(AbortSignal.timeout(requestTimeoutMs));
          return new k8s.Observable(Promise.resolve(context));
        },
        post: (context) => new k8s.Observable(Promise.resolve(context)),
      },
    ],
  });
  let client: Promise<Client> | undefined;
  const connect = (): Promise<Client> =>
    (client ??= loadKubernetesClient().then((k8s) => ({
      k8s,
      api: options.kubeConfig.makeApiClient(k8s.CoordinationV1Api),
      options: perRequest(k8s),
    })));

  return {
    async get() {
      const { k8s, api, options } = await connect();
      try {
        return fromLease(await api.readNamespacedLease({ name, namespace }, options));
      } catch (error) {
        if (statusOf(k8s, error) === 404) return undefined;
        throw translate(k8s, error, 'read');
      }
    },
    async create(record) {
      const { k8s, api, options } = await connect();
      try {
        return fromLease(
          await api.createNamespacedLease({ namespace, body: toLease(k8s, record, namespace, name) }, options),
        );
      } catch (error) {
        throw translate(k8s, error, 'create');
      }
    },
    async update(record) {
      const { k8s, api, options } = await connect();
      try {
        return fromLease(
          await api.replaceNamespacedLease({ name, namespace, body: toLease(k8s, record, namespace, name) }, options),
        );
      } catch (error) {
        throw translate(k8s, error, 'update');
      }
    },
    describe: () => where,
  };

  function translate(k8s: typeof K8s, error: unknown, verb: string): Error {
    const status = statusOf(k8s, error);
    if (status === 409) {
      const reason = verb === 'create' ? 'already_exists' : 'conflict';
      return new LeaseConflictError(reason, `${where}: ${verb} lost a race (409 ${statusReason(k8s, error)})`, {
        cause: error,
      });
    }
    const shown = status === undefined ? String((error as Error)?.message ?? error) : `HTTP ${status}`;
    return new SwitchyardError('upstream_unavailable', `${where}: ${verb} failed: ${shown}`, { cause: error });
  }
}

interface Client {
  readonly k8s: typeof K8s;
  readonly api: K8s.CoordinationV1Api;
  readonly options: ConfigurationOptions<ObservableMiddleware>;
}

let loading: Promise<typeof K8s> | undefined;
/** Loaded on first use: the client costs seconds and tens of MB to import, which memory and file locks never need. */
function loadKubernetesClient(): Promise<typeof K8s> {
  return (loading ??= import('@kubernetes/client-node'));
}

function statusOf(k8s: typeof K8s, error: unknown): number | undefined {
  return error instanceof k8s.ApiException ? (error.code as number) : undefined;
}

/** The `reason` of a Kubernetes `Status` body (a JSON string in client-node 2), if any. */
function statusReason(k8s: typeof K8s, error: unknown): string {
  if (!(error instanceof k8s.ApiException)) return '';
  try {
    const body: unknown = typeof error.body === 'string' ? JSON.parse(error.body) : error.body;
    const reason = (body as { reason?: unknown } | null)?.reason;
    return typeof reason === 'string' ? reason : '';
  } catch {
    return '';
  }
}

function toLease(k8s: typeof K8s, record: LeaseRecord, namespace: string, name: string): V1Lease {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name, namespace, ...(record.resourceVersion ? { resourceVersion: record.resourceVersion } : {}) },
    spec: {
      // An empty string clears the holder on replace, as client-go writes a released lease.
      holderIdentity: record.holderIdentity ?? '',
      leaseDurationSeconds: record.leaseDurationSeconds,
      acquireTime: new k8s.V1MicroTime(record.acquireTime.getTime()),
      renewTime: new k8s.V1MicroTime(record.renewTime.getTime()),
      leaseTransitions: record.leaseTransitions,
    },
  };
}

/** Times come back as strings at run time despite the `Date` typing; parse whatever arrives. */
function toDate(value: unknown): Date {
  if (value instanceof Date) return new Date(value.getTime());
  if (typeof value === 'string') {
    const parsed = new Date(value);
    if (!Number.isNaN(parsed.getTime())) return parsed;
  }
  return new Date(0);
}

function fromLease(lease: V1Lease): LeaseRecord {
  const spec = lease.spec ?? {};
  const holder = spec.holderIdentity;
  return {
    holderIdentity: holder === undefined || holder === null || holder === '' ? undefined : holder,
    leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
    acquireTime: toDate(spec.acquireTime),
    renewTime: toDate(spec.renewTime),
    leaseTransitions: spec.leaseTransitions ?? 0,
    ...(lease.metadata?.resourceVersion ? { resourceVersion: lease.metadata.resourceVersion } : {}),
  };
}
