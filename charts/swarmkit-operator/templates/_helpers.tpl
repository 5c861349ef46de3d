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
{{- if .Values.webView.enabled }}
- --web-view=0.0.0.0:{{ .Values.webView.port }}
{{- end }}
{{- if .Values.logging.verbose }}
- --verbose
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* RBAC ------------------------------------------------------------------------------- */}}

{{/* What the operator does in each watched namespace (all of them in cluster-wide mode).
     The chart README explains each rule; tests/integration/test_helm_rbac.py fails when
     the ServiceAccount can do anything beyond this. */}}
{{- define "swarmkit-operator.namespacedRules" -}}
# Watch the five kinds (kopf indexes) and read them. The operator never writes spec,
# labels or annotations: kopf keeps any bookkeeping in status.kopf.
- apiGroups: [swarmkit.dev]
  resources: [workspaces, skills, agents, topologies, runs]
  verbs: [get, list, watch]
# kopf's finalizer (swarmkit.dev/operator) on a Topology while its schedule timer runs.
- apiGroups: [swarmkit.dev]
  resources: [topologies]
  verbs: [patch]
# Status is the operator's: conditions, versions, pins, Run outcomes (merge patches).
- apiGroups: [swarmkit.dev]
  resources: [workspaces/status, skills/status, agents/status, topologies/status, runs/status]
  verbs: [patch]
# Human review: the operator opens a Review for each question a parked Run (or a
# swarm-authored Skill) reports, and records what it made of the decision in its status.
# It never writes spec.decision (the admission policy would refuse it anyway).
- apiGroups: [swarmkit.dev]
  resources: [reviews]
  verbs: [create, get, list, watch]
- apiGroups: [swarmkit.dev]
  resources: [reviews/status]
  verbs: [patch]
# Scheduled Runs (Topology spec.schedule) and Run retention (TTL, historyLimit).
- apiGroups: [swarmkit.dev]
  resources: [runs]
  verbs: [create, delete]
# Rendered ConfigMaps and Jobs carry ownerReferences with blockOwnerDeletion to their
# Workspace, Skill, Agent or Run; clusters with the OwnerReferencesPermissionEnforcement
# admission plugin (e.g. OpenShift) require this for it.
- apiGroups: [swarmkit.dev]
  resources: [workspaces/finalizers, skills/finalizers, agents/finalizers, runs/finalizers]
  verbs: [update]
# Rendered, immutable, content-addressed ConfigMaps (and Skill files referenced from a
# ConfigMap): created once, never updated; patch only merges labels (a Run's bundle is
# labelled finished); deleted when nothing refers to them.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [create, get, list, watch, patch, delete]
# The skill library (usage roll-ups, version history): swarmkit-skill-library and, past
# ~900 KiB, its shards swarmkit-skill-library-<i>, rewritten in place. RBAC cannot name a
# prefix, and create/patch/delete on ConfigMaps are granted above anyway.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [update]
# One Job per Run; deleted to cancel.
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create, get, list, watch, delete]
# A Run's pod: phase, exit code and termination message (the runner's result). The Job's
# pod template carries the operator's finalizer (swarmkit.dev/run-outcome) so the pod
# outlives a deleted Job until the outcome is recorded; patch removes exactly that.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, patch]
# A served Topology (spec.serve) and an Agent's MCP gateway (spec.gateway): a Deployment
# and a Service, server-side applied, owned by the Topology or Agent; deleted when the
# field goes. (topologies/finalizers: their ownerReferences block the owner's deletion,
# as for Runs.)
- apiGroups: [apps]
  resources: [deployments]
  verbs: [create, get, list, watch, patch, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [create, get, patch, delete]
- apiGroups: [swarmkit.dev]
  resources: [topologies/finalizers]
  verbs: [update]
# An Agent's MCP gateway opens a Review for a call that waits for a person, as its own
# ServiceAccount gw-<agent>: the operator renders it and a Role + RoleBinding allowing
# only create/get/watch on Reviews in that namespace (verbs the operator holds itself, so
# RBAC lets it grant them without escalate or bind).
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [create, get, patch, delete]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [create, get, patch, delete]
# A parked run prints its checkpoint on stdout (the termination message holds only 4 KiB
# and its sha256); the operator reads it from the pod log into an immutable ConfigMap.
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
# Workspace credential references: which Secrets and keys exist (values are never copied;
# Run pods get them through secretKeyRef env).
- apiGroups: [""]
  resources: [secrets]
  verbs: [list, watch]
# An Event for every condition transition; a Job's warning Events explain a failed pod.
- apiGroups: [""]
  resources: [events]
  verbs: [create, list]
{{- end }}

{{/* Leader election: the Lease in the release's namespace (see templates/rbac.yaml). A
     create cannot be limited to a name; get and update are. */}}
{{- define "swarmkit-operator.leaseRules" -}}
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [{{ .Values.leaderElection.leaseName | default (include "swarmkit-operator.fullname" .) | quote }}]
  verbs: [get, update]
{{- end }}

{{/* Cluster-scoped reads kopf needs: follow CRDs (the operator may start before its CRDs
     are established) and, when watching a list of namespaces, the namespaces. */}}
{{- define "swarmkit-operator.clusterRules" -}}
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [get, list, watch]
{{- if not (include "swarmkit-operator.clusterWide" .) }}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
{{- end }}
{{- end }}
