{{- define "scheduler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "scheduler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "scheduler.name" . -}}
{{- /* A release named after its chart (switchyard-scheduler) is not doubled to switchyard-scheduler-scheduler. */ -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "scheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "scheduler.labels" -}}
{{ include "scheduler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: switchyard
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "scheduler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "scheduler.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "scheduler.leaseName" -}}
{{- default (include "scheduler.fullname" .) .Values.election.leaseName -}}
{{- end -}}

{{- define "scheduler.joinSecretName" -}}
{{- default (printf "%s-join" (include "scheduler.fullname" .)) .Values.joinTokens.existingSecret -}}
{{- end -}}

{{- define "scheduler.hasJoinTokens" -}}
{{- if or .Values.joinTokens.existingSecret .Values.joinTokens.values -}}true{{- end -}}
{{- end -}}

{{- define "scheduler.apiSecretName" -}}
{{- default (printf "%s-api" (include "scheduler.fullname" .)) .Values.apiTokens.existingSecret -}}
{{- end -}}

{{- define "scheduler.hasApiTokens" -}}
{{- if or .Values.apiTokens.existingSecret .Values.apiTokens.values -}}true{{- end -}}
{{- end -}}

{{- define "scheduler.peerSecretName" -}}
{{- default (printf "%s-peer" (include "scheduler.fullname" .)) .Values.peerTokens.existingSecret -}}
{{- end -}}

{{- define "scheduler.hasPeerTokens" -}}
{{- if or .Values.peerTokens.existingSecret .Values.peerTokens.values -}}true{{- end -}}
{{- end -}}

{{- /*
The test pod's labels: the release's, but not its selector (name and instance), which the Services, the
PodDisruptionBudget and the NetworkPolicy select on: a pod matching it would be counted as a replica.
part-of=switchyard is what the NetworkPolicy admits.
*/ -}}
{{- define "scheduler.testLabels" -}}
app.kubernetes.io/name: {{ printf "%s-test" (include "scheduler.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: test
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: switchyard
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "scheduler.scheme" -}}
{{- if .Values.tls.existingSecret }}https{{ else }}http{{ end -}}
{{- end -}}

{{- /* An alert's `for` and severity label, from its entry in prometheusRule.alerts. */ -}}
{{- define "scheduler.alertFor" -}}
for: {{ .for }}
labels:
  severity: {{ .severity | quote }}
{{- end -}}

{{- /*
The runbook_url annotation of an alert, called with (list $ "<alert name>"): prometheusRule.runbookBaseUrl, #, and
the anchor GitHub gives the heading of the alert's runbook in docs/operations.md (its name alone, so lower-cased);
nothing while the base is empty: the chart cannot know where the operator serves the page.
*/ -}}
{{- define "scheduler.runbookUrl" -}}
{{- with (index . 0).Values.prometheusRule.runbookBaseUrl -}}
runbook_url: {{ printf "%s#%s" . (lower (index $ 1)) | quote }}
{{- end -}}
{{- end -}}

{{- /*
The label matchers that hold an alert to this release's replicas: the labels the Prometheus Operator gives the
targets of the chart's ServiceMonitor, namespace and service, the one Service it finds them through (the
headless peers Service; the client Service selects the same pods). The namespace alone would add up two
releases in one namespace: two leaders where each release has one.
*/ -}}
{{- define "scheduler.alertScope" -}}
{{- printf "namespace=%q,service=%q" .Release.Namespace (printf "%s-peers" (include "scheduler.fullname" .)) -}}
{{- end -}}

{{- /*
The names of the labels of scheduler.alertScope ("namespace, service"), for the by () of each aggregation in an alert.
An aggregation without them drops every label: its alert would fire with none that says which release it is
about, and none that Alertmanager's routes (most by namespace) match. No label name, namespace or object name
holds a comma or an equals sign, so splitting the matchers there is exact.
*/ -}}
{{- define "scheduler.alertScopeLabels" -}}
{{- $names := list -}}
{{- range splitList "," (include "scheduler.alertScope" .) -}}
{{- $names = append $names (first (splitList "=" .)) -}}
{{- end -}}
{{- join ", " $names -}}
{{- end -}}
