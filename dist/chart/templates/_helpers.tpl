{{/* The chart name, or nameOverride. */}}
{{- define "journey-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object's name: fullnameOverride, else the release name when
it contains the chart name, else release-chart. */}}
{{- define "journey-operator.fullname" -}}
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

{{/* The namespace the manager runs in. */}}
{{- define "journey-operator.namespace" -}}
{{- .Release.Namespace }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "journey-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "journey-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the manager's pods. */}}
{{- define "journey-operator.selectorLabels" -}}
control-plane: controller-manager
app.kubernetes.io/name: {{ include "journey-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The manager's ServiceAccount. */}}
{{- define "journey-operator.serviceAccountName" -}}
{{ include "journey-operator.fullname" . }}-controller-manager
{{- end }}

{{/* The Secret holding the webhook's serving certificate. */}}
{{- define "journey-operator.webhookSecretName" -}}
{{- if eq .Values.webhook.certificate.source "provided" }}
{{- required "webhook.certificate.secretName is required with source provided" .Values.webhook.certificate.secretName }}
{{- else }}
{{- include "journey-operator.fullname" . }}-webhook-server-cert
{{- end }}
{{- end }}

{{/* The webhook's caBundle, for a provided certificate (cert-manager injects it otherwise). */}}
{{- define "journey-operator.webhookCABundle" -}}
{{- if eq .Values.webhook.certificate.source "provided" }}
caBundle: {{ required "webhook.certificate.caBundle is required with source provided" .Values.webhook.certificate.caBundle }}
{{- end }}
{{- end }}

{{/* In namespace-scoped mode the webhook sees only the watched namespaces. */}}
{{- define "journey-operator.webhookNamespaceSelector" -}}
{{- with .Values.watchNamespaces }}
namespaceSelector:
  matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: In
    values:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- end }}

{{/* The image reference. */}}
{{- define "journey-operator.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/* The A2A gateway's pod labels: not the manager's selector labels, so that neither
the manager's Deployment nor its Services select the gateway's pods. */}}
{{- define "journey-operator.a2aGatewaySelectorLabels" -}}
app.kubernetes.io/name: {{ include "journey-operator.name" . }}-a2a-gateway
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: a2a-gateway
{{- end }}
