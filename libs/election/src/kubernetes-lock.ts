import { ApiException, CoordinationV1Api, Observable, V1MicroTime } from '@kubernetes/client-node';
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
  const api = options.kubeConfig.makeApiClient(CoordinationV1Api);
  const { namespace, name } = options;
  const where = `kubernetes:${namespace}/${name}`;
  const requestTimeoutMs = options.requestTimeoutMs ?? 5_000;
  // Appended, so the client's own middleware (user agent) still runs.
  // The object-style API runs observable middleware (the library's own stub, not rxjs).
  const perRequest: ConfigurationOptions<ObservableMiddleware> = {
    middlewareMergeStrategy: 'append',
    middleware: [
      {
        pre: (context) => {
          context.setSignal(AbortSignal.timeout(requestTimeoutMs));
          return new Observable(Promise.resolve(context));
        },
        post: (context) => new Observable(Promise.resolve(context)),
      },
    ],
  };

  return {
    async get() {
      try {
        return fromLease(await api.readNamespacedLease({ name, namespace }, perRequest));
      } catch (error) {
        if (statusOf(error) === 404) return undefined;
        throw translate(error, 'read');
      }
    },
    async create(record) {
      try {
        return fromLease(
          await api.createNamespacedLease({ namespace, body: toLease(record, namespace, name) }, perRequest),
        );
      } catch (error) {
        throw translate(error, 'create');
      }
    },
    async update(record) {
      try {
        return fromLease(
          await api.replaceNamespacedLease({ name, namespace, body: toLease(record, namespace, name) }, perRequest),
        );
      } catch (error) {
        throw translate(error, 'update');
      }
    },
    describe: () => where,
  };

  function translate(error: unknown, verb: string): Error {
    const status = statusOf(error);
    if (status === 409) {
      const reason = verb === 'create' ? 'already_exists' : 'conflict';
      return new LeaseConflictError(reason, `${where}: ${verb} lost a race (409 ${statusReason(error)})`, {
        cause: error,
      });
    }
    const shown = status === undefined ? String((error as Error)?.message ?? error) : `HTTP ${status}`;
    return new SwitchyardError('upstream_unavailable', `${where}: ${verb} failed: ${shown}`, { cause: error });
  }
}

function statusOf(error: unknown): number | undefined {
  return error instanceof ApiException ? (error.code as number) : undefined;
}

/** The `reason` of a Kubernetes `Status` body (a JSON string in client-node 2), if any. */
function statusReason(error: unknown): string {
  if (!(error instanceof ApiException)) return '';
  try {
    const body: unknown = typeof error.body === 'string' ? JSON.parse(error.body) : error.body;
    const reason = (body as { reason?: unknown } | null)?.reason;
    return typeof reason === 'string' ? reason : '';
  } catch {
    return '';
  }
}

function toLease(record: LeaseRecord, namespace: string, name: string): V1Lease {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name, namespace, ...(record.resourceVersion ? { resourceVersion: record.resourceVersion } : {}) },
    spec: {
      // An empty string clears the holder on replace, as client-go writes a released lease.
      holderIdentity: record.holderIdentity ?? '',
      leaseDurationSeconds: record.leaseDurationSeconds,
      acquireTime: new V1MicroTime(record.acquireTime.getTime()),
      renewTime: new V1MicroTime(record.renewTime.getTime()),
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
