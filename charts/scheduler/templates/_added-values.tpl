{{- /*
The values keys added since the chart's first release, with the defaults
values.yaml gives them. `helm upgrade --reuse-values` renders with the values
of the release it upgrades in place of values.yaml, so a release installed
from an earlier chart lacks these keys; every template fills them in first
(scheduler.fillAddedValues) and renders what a plain install would. A key added
to values.yaml goes here too, with the same default: test/charts/reuse-values.test.ts
renders the chart without it.
metricsPort is not here: null turns it off, and Helm drops a key set to null
before templates see it, so a missing metricsPort reads as off, as it ran.
*/ -}}
{{- define "scheduler.addedValues" -}}
spreadOverNodes: true
topologySpreadConstraints: []
ipFamily: IPv4
connectionsMax: 16384
tunnel:
  pingIntervalMs: 5000
gatewayPingIntervalMs: 10000
writeStallTimeoutMs: 60000
runtimeState:
  processesMax: 100000
  threadsMax: 1000000
epoch:
  frameBytesMax: 67108864
  runBytesMax: 536870912
election:
  jitterFactor: 1.2
apiTokens:
  existingSecret: ''
  key: tokens
  values: []
peerTokens:
  existingSecret: ''
  key: tokens
  values: []
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
prometheusRule:
  enabled: false
  labels: {}
  runbookBaseUrl: ''
  alerts:
    noLeader:
      enabled: true
      for: 1m
      severity: critical
    multipleLeaders:
      enabled: true
      for: 2m
      severity: critical
    epochLag:
      enabled: true
      for: 1m
      severity: warning
      threshold: 5
    followerBehind:
      enabled: true
      for: 10m
      severity: warning
      threshold: 0.1
    noRuntimeAvailable:
      enabled: true
      for: 5m
      severity: critical
    tunnelStreamsHigh:
      enabled: true
      for: 5m
      severity: warning
      threshold: 3270
    connectionsHigh:
      enabled: true
      for: 5m
      severity: warning
      threshold: 0.8
    connectionsRefused:
      enabled: true
      for: 1m
      severity: warning
    runtimesOverStateLimit:
      enabled: true
      for: 5m
      severity: warning
grafanaDashboard:
  enabled: false
  labels:
    grafana_dashboard: '1'
  annotations: {}
networkPolicy:
  enabled: false
  from: []
tests:
  enabled: true
  resources:
    requests:
      cpu: 50m
      memory: 128Mi
    limits:
      memory: 256Mi
{{- end -}}

{{- /* Sets in .Values each key of scheduler.addedValues it lacks, at any depth; keeps every key it has, false, '' and 0 included. */ -}}
{{- define "scheduler.fillAddedValues" -}}
{{- include "scheduler.fillMissing" (dict "values" .Values "defaults" (include "scheduler.addedValues" . | fromYaml)) -}}
{{- end -}}

{{- define "scheduler.fillMissing" -}}
{{- range $key, $default := .defaults -}}
{{- if not (hasKey $.values $key) -}}
{{- $_ := set $.values $key $default -}}
{{- else if and (kindIs "map" $default) (kindIs "map" (get $.values $key)) -}}
{{- include "scheduler.fillMissing" (dict "values" (get $.values $key) "defaults" $default) -}}
{{- end -}}
{{- end -}}
{{- end -}}
