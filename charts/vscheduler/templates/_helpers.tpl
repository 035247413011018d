{{/* Chart name, truncated to a DNS label. */}}
{{- define "vscheduler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: "<release>-<chart>", or the release name alone when it already contains the
chart name; truncated to 63 characters (a DNS label).
*/}}
{{- define "vscheduler.fullname" -}}
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

{{/* The helm.sh/chart label value. */}}
{{- define "vscheduler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "vscheduler.labels" -}}
helm.sh/chart: {{ include "vscheduler.chart" . }}
{{ include "vscheduler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: scheduler
app.kubernetes.io/part-of: vscheduler
{{- end }}

{{/* Labels that select the scheduler pods (never change them on upgrade). */}}
{{- define "vscheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vscheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Name of the ServiceAccount the pods run as. */}}
{{- define "vscheduler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "vscheduler.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Image reference: repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "vscheduler.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Replica count. Empty: 2 with leader election, 1 without. Given: as given, but more than
one replica without leader election fails the render (two active schedulers would race to
bind the same pods).
*/}}
{{- define "vscheduler.replicas" -}}
{{- if kindIs "invalid" .Values.replicas }}
{{- if .Values.leaderElect }}2{{ else }}1{{ end }}
{{- else }}
{{- $replicas := int .Values.replicas }}
{{- if and (not .Values.leaderElect) (gt $replicas 1) }}
{{- fail (printf "replicas=%d needs leaderElect=true: without a lease every replica would schedule, and they would bind the same pods" $replicas) }}
{{- end }}
{{- $replicas }}
{{- end }}
{{- end }}

{{/* The port of listenAddress (":8080", "0.0.0.0:8080", "[::]:8080" -> 8080). */}}
{{- define "vscheduler.listenPort" -}}
{{- $port := regexFind "[0-9]+$" .Values.listenAddress }}
{{- if not $port }}
{{- fail (printf "listenAddress %q has no port" .Values.listenAddress) }}
{{- end }}
{{- $port }}
{{- end }}

{{/*
The openAPIV3Schema of a resource list (a map of resource name to quantity), as
Kubernetes writes it for core types.
*/}}
{{- define "vscheduler.crd.resourceList" -}}
type: object
additionalProperties:
  anyOf:
    - type: integer
    - type: string
  pattern: '^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$'
  x-kubernetes-int-or-string: true
{{- end }}
