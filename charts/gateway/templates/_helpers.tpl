{{- define "gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gateway.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "gateway.name" . -}}
{{- /* A release named after its chart (switchyard-gateway) is not doubled to switchyard-gateway-gateway. */ -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gateway.labels" -}}
{{ include "gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: switchyard
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- /*
The test pod's labels: the release's, but not its selector (name and instance), which the Services and the
PodDisruptionBudget select on: a pod matching it would be counted as a gateway.
*/ -}}
{{- define "gateway.testLabels" -}}
app.kubernetes.io/name: {{ printf "%s-test" (include "gateway.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: test
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: switchyard
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- /* An alert's `for` and severity label, from its entry in prometheusRule.alerts. */ -}}
{{- define "gateway.alertFor" -}}
for: {{ .for }}
labels:
  severity: {{ .severity | quote }}
{{- end -}}

{{- /*
The runbook_url annotation of an alert, called with (list $ "<alert name>"): prometheusRule.runbookBaseUrl, #, and
the anchor GitHub gives the heading of the alert's runbook in docs/operations.md (its name alone, so lower-cased);
nothing while the base is empty: the chart cannot know where the operator serves the page.
*/ -}}
{{- define "gateway.runbookUrl" -}}
{{- with (index . 0).Values.prometheusRule.runbookBaseUrl -}}
runbook_url: {{ printf "%s#%s" . (lower (index $ 1)) | quote }}
{{- end -}}
{{- end -}}

{{- /*
The label matchers that hold an alert to this release's gateways: the labels the Prometheus Operator gives the
targets of the chart's ServiceMonitor, namespace and service, the Service it finds them through (the metrics
Service with metricsPort, else the /mcp one). The namespace alone would add up two releases in one namespace.
*/ -}}
{{- define "gateway.alertScope" -}}
{{- $service := include "gateway.fullname" . -}}
{{- if not (kindIs "invalid" .Values.metricsPort) }}{{ $service = printf "%s-metrics" $service }}{{ end -}}
{{- printf "namespace=%q,service=%q" .Release.Namespace $service -}}
{{- end -}}

{{- /*
The names of the labels of gateway.alertScope ("namespace, service"), for the by () of each aggregation in an alert.
An aggregation without them drops every label: its alert would fire with none that says which release it is
about, and none that Alertmanager's routes (most by namespace) match. No label name, namespace or object name
holds a comma or an equals sign, so splitting the matchers there is exact.
*/ -}}
{{- define "gateway.alertScopeLabels" -}}
{{- $names := list -}}
{{- range splitList "," (include "gateway.alertScope" .) -}}
{{- $names = append $names (first (splitList "=" .)) -}}
{{- end -}}
{{- join ", " $names -}}
{{- end -}}
