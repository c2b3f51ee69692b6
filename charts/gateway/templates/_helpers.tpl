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

{{- /*
"true" when the release hands its gateways a Redis URL for the route cache: redis.existingSecret, or the URL's
variable set through extraEnv; empty otherwise. A gateway without Redis never counts a Redis failure, so the
alert on them would watch a counter that stays at 0.
*/ -}}
{{- define "gateway.hasRedis" -}}
{{- $viaEnv := false -}}
{{- range .Values.extraEnv -}}
{{- if and (eq .name "SWITCHYARD_ROUTE_CACHE_REDIS_URL") (or .valueFrom .value) -}}
{{- $viaEnv = true -}}
{{- end -}}
{{- end -}}
{{- if or .Values.redis.existingSecret $viaEnv -}}true{{- end -}}
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
Fails unless the `for` of an absent() alert is at least twice the interval the chart's monitor scrapes at; called
with (list $ "<key under prometheusRule.alerts>" "<monitor's values key>"). A target whose scrape fails has its
series marked stale at once, so absent() turns true at the first scrape that misses and false at the next that
answers: with a shorter `for`, one missed scrape of the last pod (a restart, a slow answer) fires the alert.
*/ -}}
{{- define "gateway.checkAbsentFor" -}}
{{- $root := index . 0 -}}
{{- $forKey := printf "prometheusRule.alerts.%s.for" (index . 1) -}}
{{- $intervalKey := printf "%s.interval" (index . 2) -}}
{{- $for := index $root.Values.prometheusRule.alerts (index . 1) "for" -}}
{{- $interval := index $root.Values (index . 2) "interval" -}}
{{- $forMs := include "gateway.durationMs" (list $for $forKey) | int64 -}}
{{- $intervalMs := include "gateway.durationMs" (list $interval $intervalKey) | int64 -}}
{{- if lt $forMs (mul 2 $intervalMs) -}}
{{- $least := include "gateway.durationText" (mul 2 $intervalMs) -}}
{{- $most := include "gateway.durationText" (div $forMs 2) -}}
{{- fail (printf "%s (%v) is under twice %s (%v): the alert's absent() would fire on one missed scrape. Set %s to at least %s, or %s to at most %s" $forKey $for $intervalKey $interval $forKey $least $intervalKey $most) -}}
{{- end -}}
{{- end -}}

{{- /*
A Prometheus duration (90s, 1m30s, 2h, 500ms, 0) in milliseconds; called with (list <value> "<its values key>"). It
reads the units Prometheus does (y as 365 days, w, d, h, m, s, ms), each after its digits. Anything else (digits
without a unit, 1.5m, words, a value that is no string) fails the render, naming the key: misread, a duration
would be compared as some other one.
*/ -}}
{{- define "gateway.durationMs" -}}
{{- $value := index . 0 -}}
{{- $parts := list -}}
{{- if kindIs "string" $value }}{{ $parts = regexFindAll "[0-9]+(ms|y|w|d|h|m|s)" $value -1 }}{{ end -}}
{{- if not (or (eq (toString $value) "0") (and $parts (eq (join "" $parts) $value))) -}}
{{- fail (printf "%s (%v) is no duration this chart reads: write it as Prometheus does, digits and a unit (y, w, d, h, m, s, ms), as in 90s, 1m30s, 2h" (index . 1) $value) -}}
{{- end -}}
{{- $unitMs := dict "y" 31536000000 "w" 604800000 "d" 86400000 "h" 3600000 "m" 60000 "s" 1000 "ms" 1 -}}
{{- $ms := 0 -}}
{{- range $parts -}}
{{- $unit := regexFind "[a-z]+$" . -}}
{{- $ms = add $ms (mul (trimSuffix $unit . | atoi) (get $unitMs $unit)) -}}
{{- end -}}
{{- $ms -}}
{{- end -}}

{{- /* Milliseconds as Prometheus writes a duration: 90000 as 1m30s, 0 as 0s. */ -}}
{{- define "gateway.durationText" -}}
{{- $left := int64 . -}}
{{- $text := "" -}}
{{- range list (list "h" 3600000) (list "m" 60000) (list "s" 1000) (list "ms" 1) -}}
{{- $n := div $left (index . 1) -}}
{{- if gt $n 0 -}}
{{- $text = printf "%s%d%s" $text $n (index . 0) -}}
{{- $left = sub $left (mul $n (index . 1)) -}}
{{- end -}}
{{- end -}}
{{- default "0s" $text -}}
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

{{- /*
What an absent() alert ends with to hold its peace while the release is scaled to 0 outside the chart (kubectl
scale): kube-state-metrics' desired replicas of this Deployment, 0. The series is missing without kube-state-metrics
(or where its scrape renames the object's namespace label), and then `unless` drops nothing: the alert fires as
before. (The chart's replicas take no 0; an HPA leaves a Deployment scaled to 0 alone.)
*/ -}}
{{- define "gateway.unlessScaledToZero" -}}
{{- printf " unless on() kube_deployment_spec_replicas{namespace=%q,deployment=%q} == 0" .Release.Namespace (include "gateway.fullname" .) -}}
{{- end -}}

{{- /*
The uid of this release's dashboard: Grafana's limit is 40 characters, which a namespace and a release name may
pass, so a hash of them. Stable across upgrades (links and stars keep working), distinct per chart and release.
*/ -}}
{{- define "gateway.dashboardUid" -}}
{{- printf "switchyard-gateway-%s" (sha256sum (printf "%s/%s" .Release.Namespace (include "gateway.fullname" .)) | trunc 16) -}}
{{- end -}}

{{- /*
The dashboard of dashboards/gateway.json as this release's: its uid and title its own (Grafana refuses a second
dashboard of one title in a folder), and its constant variables named after the labels of gateway.alertScope given
this release's values, so that every panel, whose selectors all read them, shows the release's series alone. The
file is parsed and written again, not run through tpl: its legends ({{pod}}) are Grafana's templates.
*/ -}}
{{- define "gateway.dashboard" -}}
{{- $dashboard := .Files.Get "dashboards/gateway.json" | fromJson -}}
{{- $scope := dict -}}
{{- range splitList "," (include "gateway.alertScope" .) -}}
{{- $matcher := splitList "=" . -}}
{{- $_ := set $scope (first $matcher) (last $matcher | trimAll "\"") -}}
{{- end -}}
{{- range $variable := $dashboard.templating.list -}}
{{- if and (eq $variable.type "constant") (hasKey $scope $variable.name) -}}
{{- $value := get $scope $variable.name -}}
{{- $_ := set $variable "query" $value -}}
{{- $_ := set $variable "current" (dict "text" $value "value" $value) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $dashboard "uid" (include "gateway.dashboardUid" .) -}}
{{- $_ := set $dashboard "title" (printf "Switchyard gateway (%s/%s)" .Release.Namespace .Release.Name) -}}
{{- toPrettyJson $dashboard -}}
{{- end -}}
