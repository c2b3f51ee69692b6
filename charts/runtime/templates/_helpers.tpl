{{- define "runtime.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "runtime.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "runtime.name" . -}}
{{- /* A release named after its chart (switchyard-runtime) is not doubled to switchyard-runtime-runtime. */ -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "runtime.selectorLabels" -}}
app.kubernetes.io/name: {{ include "runtime.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "runtime.labels" -}}
{{ include "runtime.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: switchyard
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- /* An alert's `for` and severity label, from its entry in prometheusRule.alerts. */ -}}
{{- define "runtime.alertFor" -}}
for: {{ .for }}
labels:
  severity: {{ .severity | quote }}
{{- end -}}

{{- /*
The runbook_url annotation of an alert, called with (list $ "<alert name>"): prometheusRule.runbookBaseUrl, #, and
the anchor GitHub gives the heading of the alert's runbook in docs/operations.md (its name alone, so lower-cased);
nothing while the base is empty: the chart cannot know where the operator serves the page.
*/ -}}
{{- define "runtime.runbookUrl" -}}
{{- with (index . 0).Values.prometheusRule.runbookBaseUrl -}}
runbook_url: {{ printf "%s#%s" . (lower (index $ 1)) | quote }}
{{- end -}}
{{- end -}}

{{- /*
The label matchers that hold an alert to this release's runtimes: the labels the Prometheus Operator gives the
targets of the chart's PodMonitor, namespace and job, which is <namespace>/<PodMonitor name> while the PodMonitor
sets no jobLabel. The namespace alone would add up two releases in one namespace.
*/ -}}
{{- define "runtime.alertScope" -}}
{{- $job := printf "%s/%s" .Release.Namespace (include "runtime.fullname" .) -}}
{{- printf "namespace=%q,job=%q" .Release.Namespace $job -}}
{{- end -}}

{{- /*
The names of the labels of runtime.alertScope ("namespace, job"), for the by () of each aggregation in an alert.
An aggregation without them drops every label: its alert would fire with none that says which release it is
about, and none that Alertmanager's routes (most by namespace) match. No label name, namespace or object name
holds a comma or an equals sign, so splitting the matchers there is exact.
*/ -}}
{{- define "runtime.alertScopeLabels" -}}
{{- $names := list -}}
{{- range splitList "," (include "runtime.alertScope" .) -}}
{{- $names = append $names (first (splitList "=" .)) -}}
{{- end -}}
{{- join ", " $names -}}
{{- end -}}
