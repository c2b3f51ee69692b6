// Validation of rendered manifests against the Kubernetes API schemas
// (kubernetes-models). A module of its own: loading every model class takes
// about half a second of CPU, which only the test files that validate every
// kind should pay.
import assert from 'node:assert/strict';
import { DaemonSet, Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { ConfigMap, Pod, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import {
  PodMonitor,
  PrometheusRule,
  ServiceMonitor,
} from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import type { Manifest } from './helm.ts';

const MODELS: Record<string, new (obj: never) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'apps/v1/DaemonSet': DaemonSet,
  'apps/v1/StatefulSet': StatefulSet,
  'v1/Service': Service,
  // The charts' helm test hooks.
  'v1/Pod': Pod,
  'v1/ServiceAccount': ServiceAccount,
  'v1/Secret': Secret,
  'v1/ConfigMap': ConfigMap,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/Ingress': Ingress,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
  'monitoring.coreos.com/v1/PodMonitor': PodMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
};

/** Asserts that each manifest is of a kind with a kubernetes-models class, and valid by that class's schema. */
export function assertValidObjects(manifests: readonly Manifest[]): void {
  for (const m of manifests) {
    const Model = MODELS[`${m.apiVersion}/${m.kind}`];
    assert.ok(Model, `no model for ${m.apiVersion}/${m.kind}`);
    assert.doesNotThrow(() => new Model(m as never).validate(), `${m.kind}/${m.metadata.name}`);
  }
}
