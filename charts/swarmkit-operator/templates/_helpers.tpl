{{/* Names ------------------------------------------------------------------------------ */}}

{{- define "swarmkit-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "swarmkit-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "swarmkit-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "swarmkit-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "swarmkit-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Labels ----------------------------------------------------------------------------- */}}

{{- define "swarmkit-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "swarmkit-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "swarmkit-operator.labels" -}}
helm.sh/chart: {{ include "swarmkit-operator.chart" . }}
{{ include "swarmkit-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: swarmkit-operator
{{- end }}

{{/* Images: digest wins over tag; an empty tag means the chart's appVersion ------------ */}}

{{- define "swarmkit-operator.imageRef" -}}
{{- $img := index . 0 }}{{- $root := index . 1 }}
{{- if $img.digest }}
{{- printf "%s@%s" $img.repository $img.digest }}
{{- else }}
{{- printf "%s:%s" $img.repository (default $root.Chart.AppVersion $img.tag) }}
{{- end }}
{{- end }}

{{- define "swarmkit-operator.image" -}}
{{- include "swarmkit-operator.imageRef" (list .Values.image .) }}
{{- end }}

{{- define "swarmkit-operator.runtimeImage" -}}
{{- include "swarmkit-operator.imageRef" (list .Values.runtimeImage .) }}
{{- end }}

{{/* Mode ------------------------------------------------------------------------------- */}}

{{/* "true" when the operator watches every namespace (ClusterRole), "" otherwise. */}}
{{- define "swarmkit-operator.clusterWide" -}}
{{- if not .Values.watchNamespaces }}true{{- end }}
{{- end }}

{{/* Cross-field checks values.schema.json cannot express, with a message naming the keys. */}}
{{- define "swarmkit-operator.validate" -}}
{{- if and .Values.metrics.enabled (eq (int .Values.metrics.port) (int .Values.health.port)) }}
{{- fail (printf "metrics.port and health.port must differ (both are %v)" .Values.metrics.port) }}
{{- end }}
{{- if and .Values.webView.enabled (or (eq (int .Values.webView.port) (int .Values.health.port)) (and .Values.metrics.enabled (eq (int .Values.webView.port) (int .Values.metrics.port)))) }}
{{- fail (printf "webView.port must differ from health.port and metrics.port (%v)" .Values.webView.port) }}
{{- end }}
{{- $wv := .Values.webView }}
{{- if and $wv.enabled (not $wv.singleUser) (or (eq (int $wv.localPort) (int $wv.port)) (eq (int $wv.localPort) (int .Values.health.port)) (and .Values.metrics.enabled (eq (int $wv.localPort) (int .Values.metrics.port)))) }}
{{- fail (printf "webView.localPort must differ from webView.port, health.port and metrics.port (%v)" $wv.localPort) }}
{{- end }}
{{- if and $wv.enabled (not $wv.singleUser) (not (or $wv.proxy.image.tag $wv.proxy.image.digest)) }}
{{- fail "webView.proxy.image: set a tag or a digest" }}
{{- end }}
{{- $pdb := .Values.podDisruptionBudget }}
{{- if and $pdb.enabled (eq (toString $pdb.minAvailable) "") (eq (toString $pdb.maxUnavailable) "") }}
{{- fail "podDisruptionBudget: set one of minAvailable or maxUnavailable" }}
{{- end }}
{{- if and $pdb.enabled (ne (toString $pdb.minAvailable) "") (ne (toString $pdb.maxUnavailable) "") }}
{{- fail "podDisruptionBudget: set only one of minAvailable or maxUnavailable (set the other to \"\")" }}
{{- end }}
{{- $le := .Values.leaderElection }}
{{- if not (and (gt (int $le.leaseDurationSeconds) (int $le.renewDeadlineSeconds)) (gt (mul (int $le.renewDeadlineSeconds) 10) (mul (int $le.retryPeriodSeconds) 12))) }}
{{- fail (printf "leaderElection: leaseDurationSeconds > renewDeadlineSeconds > 1.2 x retryPeriodSeconds must hold (got %v, %v, %v)" $le.leaseDurationSeconds $le.renewDeadlineSeconds $le.retryPeriodSeconds) }}
{{- end }}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) }}
{{- fail "serviceAccount.name is required when serviceAccount.create is false (the operator must not run as the namespace's default ServiceAccount)" }}
{{- end }}
{{- end }}

{{/* The operator configuration file (swarmkit_operator.config reads it at start-up). */}}
{{- define "swarmkit-operator.config" -}}
{{- $allowed := list }}
{{- range .Values.config.security.skills.allowed }}
{{- $entry := dict "skill" .skill "path" .path "sha256" (lower .sha256) }}
{{- if .namespace }}{{- $_ := set $entry "namespace" .namespace }}{{- end }}
{{- $allowed = append $allowed $entry }}
{{- end }}
{{- $skills := dict "allowScriptExecution" .Values.config.security.skills.allowScriptExecution "allowed" $allowed }}
{{- $config := dict "security" (dict "skills" $skills) }}
{{- $_ := set $config "runtime" (dict "image" (include "swarmkit-operator.runtimeImage" .)) }}
{{- $_ = set $config "watchNamespaces" .Values.watchNamespaces }}
{{- $_ = set $config "maxJobRecreations" (int .Values.config.maxJobRecreations) }}
{{- $_ = set $config "skillLibrary" (dict "historyLimit" (int .Values.config.skillLibrary.historyLimit)) }}
{{- toYaml $config }}
{{- end }}

{{/* The operator's command-line arguments (the image's entry point is
     `python -m swarmkit_operator`; see the chart README for the contract). The namespaces
     to watch come from the configuration file (watchNamespaces). Leader election is
     always on: with one replica it costs one Lease renewal every retryPeriod, and a
     rolling update never has two writers. */}}
{{- define "swarmkit-operator.args" -}}
- --liveness=http://0.0.0.0:{{ .Values.health.port }}{{ .Values.health.path }}
- --metrics-port={{ if .Values.metrics.enabled }}{{ .Values.metrics.port }}{{ else }}0{{ end }}
- --leader-elect
- --leader-election-id={{ .Values.leaderElection.leaseName | default (include "swarmkit-operator.fullname" .) }}
- --lease-duration={{ .Values.leaderElection.leaseDurationSeconds }}
- --renew-deadline={{ .Values.leaderElection.renewDeadlineSeconds }}
- --retry-period={{ .Values.leaderElection.retryPeriodSeconds }}
- --log-format={{ .Values.logging.format }}
{{- if and .Values.webView.enabled .Values.webView.singleUser }}
- --web-view=0.0.0.0:{{ .Values.webView.port }}
- --web-view-single-user
{{- else if .Values.webView.enabled }}
{{- /* per user: on loopback, behind the proxy container (its only way in) */}}
- --web-view=127.0.0.1:{{ .Values.webView.localPort }}
{{- end }}
{{- if .Values.logging.verbose }}
- --verbose
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* RBAC ------------------------------------------------------------------------------- */}}

{{/* The rule lists (namespacedRules, clusterRules, leaseRules) are generated from
     operator/swarmkit_operator/rbac.py into _rbac_rules.tpl. */}}
