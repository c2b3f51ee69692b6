{{- /*
The values keys added since the chart's first release, with the defaults
values.yaml gives them. `helm upgrade --reuse-values` renders with the values
of the release it upgrades in place of values.yaml, so a release installed
from an earlier chart lacks these keys; every template fills them in first
(gateway.fillAddedValues) and renders what a plain install would. A key added
to values.yaml goes here too, with the same default: test/charts/reuse-values.test.ts
renders the chart without it.
metricsPort is not here: null turns it off, and Helm drops a key set to null
before templates see it, so a missing metricsPort reads as off, as it ran.
*/ -}}
{{- define "gateway.addedValues" -}}
spreadOverNodes: true
topologySpreadConstraints: []
ipFamily: IPv4
defaultClass: demo
upstreamToken:
  existingSecret: ''
  key: token
eventStreamsOverHttp2: true
relayConnections: true
trustedProxies: []
connectionsMax: 16384
principalConcurrencyMax: 256
clientIpv6PrefixLength: 64
bodyTimeoutMs: 60000
headerBytesMax: 16384
headersTimeoutMs: 30000
keepAliveTimeoutMs: 75000
identity:
  class: path:class,header:X-Switchyard-Class
  process: path:process,header:X-Switchyard-Process
  thread: mcp-session
upstreamCheckIntervalMs: 5000
eventStreamPingIntervalMs: 10000
writeStallTimeoutMs: 60000
nodeOptions: --max-semi-space-size=2
glibcTunables: glibc.malloc.mmap_threshold=10000
auth:
  resource: ''
  authorizationServers: []
  scopes: []
  principalClaim: ''
  algorithms: []
  requiredScopes: []
  classScopes: {}
  toolScopes: {}
  scopeClaims: []
  requireAccessTokenType: false
schedulerToken:
  existingSecret: ''
  key: token
redis:
  keyPrefix: 'switchyard:route:'
tls:
  existingSecret: ''
trustedCA:
  existingConfigMap: ''
  key: ca.crt
ingress:
  enabled: false
  className: ''
  annotations: {}
  hosts: []
  tls: []
serviceMonitor:
  enabled: false
  interval: 30s
  labels: {}
  tlsConfig: {}
prometheusRule:
  enabled: false
  labels: {}
  runbookBaseUrl: ''
  alerts:
    absent:
      enabled: true
      for: 5m
      severity: critical
    upstreamErrors:
      enabled: true
      for: 10m
      severity: warning
      threshold: 0.05
    serverErrors:
      enabled: true
      for: 10m
      severity: warning
      threshold: 0.05
    connectionsHigh:
      enabled: true
      for: 5m
      severity: warning
      threshold: 0.8
    connectionsRefused:
      enabled: true
      for: 1m
      severity: warning
    jwksUnavailable:
      enabled: true
      for: 1m
      severity: critical
    routeCacheRedisFailing:
      enabled: true
      for: 10m
      severity: warning
grafanaDashboard:
  enabled: false
  labels:
    grafana_dashboard: '1'
  annotations: {}
tests:
  enabled: true
  resources:
    requests:
      cpu: 50m
      memory: 128Mi
    limits:
      memory: 256Mi
{{- end -}}

{{- /* Sets in .Values each key of gateway.addedValues it lacks, at any depth; keeps every key it has, false, '' and 0 included. */ -}}
{{- define "gateway.fillAddedValues" -}}
{{- include "gateway.fillMissing" (dict "values" .Values "defaults" (include "gateway.addedValues" . | fromYaml)) -}}
{{- end -}}

{{- define "gateway.fillMissing" -}}
{{- range $key, $default := .defaults -}}
{{- if not (hasKey $.values $key) -}}
{{- $_ := set $.values $key $default -}}
{{- else if and (kindIs "map" $default) (kindIs "map" (get $.values $key)) -}}
{{- include "gateway.fillMissing" (dict "values" (get $.values $key) "defaults" $default) -}}
{{- end -}}
{{- end -}}
{{- end -}}
