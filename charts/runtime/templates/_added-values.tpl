{{- /*
The values keys added since the chart's first release, with the defaults
values.yaml gives them. `helm upgrade --reuse-values` renders with the values
of the release it upgrades in place of values.yaml, so a release installed
from an earlier chart lacks these keys; every template fills them in first
(runtime.fillAddedValues) and renders what a plain install would. A key added
to values.yaml goes here too, with the same default: test/charts/reuse-values.test.ts
renders the chart without it.
*/ -}}
{{- define "runtime.addedValues" -}}
ipFamily: IPv4
tunnelTransport: auto
tunnelPingIntervalMs: 5000
sessionIdleMs: 1800000
version: 0.0.0
metering:
  sink: ''
  queueLengthMax: 10000
directListener:
  enabled: false
  port: 7080
  connectionsMax: 16384
  token:
    existingSecret: ''
    key: token
health:
  port: 7090
podMonitor:
  enabled: false
  interval: 30s
  labels: {}
prometheusRule:
  enabled: false
  labels: {}
  runbookBaseUrl: ''
  alerts:
    absent:
      enabled: true
      for: 5m
      severity: warning
    tunnelDown:
      enabled: true
      for: 5m
      severity: warning
    sandboxesDying:
      enabled: true
      for: 5m
      severity: warning
      threshold: 5
    connectionsHigh:
      enabled: true
      for: 5m
      severity: warning
      threshold: 0.8
    connectionsRefused:
      enabled: true
      for: 1m
      severity: warning
    meteringDropped:
      enabled: true
      for: 1m
      severity: warning
grafanaDashboard:
  enabled: false
  labels:
    grafana_dashboard: '1'
  annotations: {}
trustedCA:
  existingConfigMap: ''
  key: ca.crt
shareProcessNamespace: true
{{- end -}}

{{- /* Sets in .Values each key of runtime.addedValues it lacks, at any depth; keeps every key it has, false, '' and 0 included. */ -}}
{{- define "runtime.fillAddedValues" -}}
{{- include "runtime.fillMissing" (dict "values" .Values "defaults" (include "runtime.addedValues" . | fromYaml)) -}}
{{- end -}}

{{- define "runtime.fillMissing" -}}
{{- range $key, $default := .defaults -}}
{{- if not (hasKey $.values $key) -}}
{{- $_ := set $.values $key $default -}}
{{- else if and (kindIs "map" $default) (kindIs "map" (get $.values $key)) -}}
{{- include "runtime.fillMissing" (dict "values" (get $.values $key) "defaults" $default) -}}
{{- end -}}
{{- end -}}
{{- end -}}
