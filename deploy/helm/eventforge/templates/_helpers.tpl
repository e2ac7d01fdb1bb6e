{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "eventforge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: release-chart unless the release name holds the chart name. */}}
{{- define "eventforge.fullname" -}}
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

{{/* Labels of every object. */}}
{{- define "eventforge.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "eventforge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of one component: (dict "root" $ "component" "cdc"). */}}
{{- define "eventforge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eventforge.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- with .consumer }}
eventforge.dev/consumer: {{ . }}
{{- end }}
{{- end }}

{{/* The image reference: by digest when one is given. */}}
{{- define "eventforge.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
{{- end }}

{{/* Name of a component's PostgreSQL Secret: (dict "root" $ "db" .database "component" "relay"). */}}
{{- define "eventforge.dbSecretName" -}}
{{- if .db.existingSecret -}}
{{ .db.existingSecret }}
{{- else if .db.url -}}
{{ include "eventforge.fullname" .root }}-{{ .component }}-pg
{{- else -}}
{{ fail (printf "%s.database: set existingSecret (a Secret with the connection URL) or url" .component) }}
{{- end }}
{{- end }}

{{/* A chart-made Secret holding a component's PostgreSQL URL, when no existing one is named. */}}
{{- define "eventforge.dbSecret" -}}
{{- if and (not .db.existingSecret) .db.url }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ include "eventforge.dbSecretName" . }}
  labels:
    {{- include "eventforge.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  {{- with .annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
type: Opaque
data:
  {{ .db.secretKey }}: {{ .db.url | b64enc }}
{{- end }}
{{- end }}

{{/* Pod-level settings shared by every pod. */}}
{{- define "eventforge.podSpecCommon" -}}
automountServiceAccountToken: false
enableServiceLinks: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end }}

{{/* Scheduling of a component: (dict "c" $componentValues). */}}
{{- define "eventforge.scheduling" -}}
{{- with .c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Environment of every EventForge container: (dict "root" $ "db" .database "component" "relay"). */}}
{{- define "eventforge.env" -}}
- name: EVENTFORGE_PG_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "eventforge.dbSecretName" . }}
      key: {{ .db.secretKey }}
- name: EVENTFORGE_METRICS_ADDR
  value: {{ printf "0.0.0.0:%v" .root.Values.metricsPort | quote }}
- name: EVENTFORGE_LOG_FORMAT
  value: {{ .root.Values.log.format | quote }}
- name: EVENTFORGE_LOG_LEVEL
  value: {{ .root.Values.log.level | quote }}
{{- end }}

{{/* Kafka settings as EVENTFORGE_* variables; secrets only as file paths. */}}
{{- define "eventforge.kafkaEnv" -}}
{{- $k := .Values.kafka }}
- name: EVENTFORGE_KAFKA_BROKERS
  value: {{ required "kafka.brokers is required" $k.brokers | quote }}
{{- if $k.tls.enabled }}
- name: EVENTFORGE_KAFKA_TLS
  value: "true"
{{- if $k.tls.existingSecret }}
{{- if $k.tls.caKey }}
- name: EVENTFORGE_KAFKA_TLS_CA_FILE
  value: /etc/eventforge/kafka-tls/{{ $k.tls.caKey }}
{{- end }}
{{- if $k.tls.certKey }}
- name: EVENTFORGE_KAFKA_TLS_CERT_FILE
  value: /etc/eventforge/kafka-tls/{{ $k.tls.certKey }}
- name: EVENTFORGE_KAFKA_TLS_KEY_FILE
  value: /etc/eventforge/kafka-tls/{{ required "kafka.tls.keyKey is required with certKey" $k.tls.keyKey }}
{{- end }}
{{- end }}
{{- with $k.tls.serverName }}
- name: EVENTFORGE_KAFKA_TLS_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- if $k.sasl.mechanism }}
- name: EVENTFORGE_KAFKA_SASL_MECHANISM
  value: {{ $k.sasl.mechanism | quote }}
- name: EVENTFORGE_KAFKA_SASL_USER
  value: {{ required "kafka.sasl.user is required with a mechanism" $k.sasl.user | quote }}
- name: EVENTFORGE_KAFKA_SASL_PASSWORD_FILE
  value: /etc/eventforge/kafka-sasl/{{ $k.sasl.passwordKey }}
{{- end }}
{{- end }}

{{/* Name of the Secret with the Kafka SASL password. */}}
{{- define "eventforge.kafkaSaslSecretName" -}}
{{- if .Values.kafka.sasl.existingSecret -}}
{{ .Values.kafka.sasl.existingSecret }}
{{- else if .Values.kafka.sasl.password -}}
{{ include "eventforge.fullname" . }}-kafka-sasl
{{- else -}}
{{ fail "kafka.sasl: set existingSecret (a Secret with the password) or password" }}
{{- end }}
{{- end }}

{{/* Volume mounts of the Kafka credentials and the writable /tmp. */}}
{{- define "eventforge.kafkaMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  mountPath: /etc/eventforge/kafka-tls
  readOnly: true
{{- end }}
{{- if .Values.kafka.sasl.mechanism }}
- name: kafka-sasl
  mountPath: /etc/eventforge/kafka-sasl
  readOnly: true
{{- end }}
{{- end }}

{{/* Volumes of the Kafka credentials (mode 0440, group fsGroup) and /tmp. */}}
{{- define "eventforge.kafkaVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  secret:
    secretName: {{ .Values.kafka.tls.existingSecret }}
    defaultMode: 0440
{{- end }}
{{- if .Values.kafka.sasl.mechanism }}
- name: kafka-sasl
  secret:
    secretName: {{ include "eventforge.kafkaSaslSecretName" . }}
    defaultMode: 0440
    items:
      - key: {{ .Values.kafka.sasl.passwordKey }}
        path: {{ .Values.kafka.sasl.passwordKey }}
{{- end }}
{{- end }}

{{/* Extra EVENTFORGE_* variables of a component, sorted by name. */}}
{{- define "eventforge.extraEnv" -}}
{{- range $k, $v := . }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end }}

{{/*
Probes of a long-running command, on the metrics port. liveness: /healthz
(the process serves HTTP); readiness: /readyz (the component does or can
take over its job: for the relay, streaming or a standby that reached
PostgreSQL and found the slot held by its peer).
*/}}
{{- define "eventforge.probes" -}}
startupProbe:
  httpGet:
    path: /healthz
    port: metrics
  periodSeconds: 2
  failureThreshold: 30
livenessProbe:
  httpGet:
    path: /healthz
    port: metrics
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: metrics
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 2
{{- end }}
