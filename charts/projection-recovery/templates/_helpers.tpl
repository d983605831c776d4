{{- /*
name: the chart name, or nameOverride. Used in labels and the selector.
*/ -}}
{{- define "projection-recovery.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- /*
fullname: the prefix of every namespaced object. fullnameOverride wins; a
release whose name already contains the chart name is not repeated
("projection-recovery", never "projection-recovery-projection-recovery").
*/ -}}
{{- define "projection-recovery.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "projection-recovery.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "projection-recovery.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- /* The Deployment's selector: immutable, so it never carries the version. */ -}}
{{- define "projection-recovery.selectorLabels" -}}
app.kubernetes.io/name: {{ include "projection-recovery.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "projection-recovery.labels" -}}
{{ include "projection-recovery.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- /* image: repository@digest when a digest is set, else repository:tag (tag defaults to appVersion). */ -}}
{{- define "projection-recovery.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- /*
The container securityContext every container of the chart runs with: no
privilege escalation, no capability, a read-only root filesystem, non-root.
*/ -}}
{{- define "projection-recovery.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities: {drop: ["ALL"]}
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- /* Scheduling and pull settings shared by the chart's pods. */ -}}
{{- define "projection-recovery.podScheduling" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- /* The manager's --nats-url: natsURL, else the local environment's member. */ -}}
{{- define "projection-recovery.natsURL" -}}
{{- if .Values.natsURL -}}
{{- .Values.natsURL -}}
{{- else if .Values.localEnvironment.enabled -}}
{{- printf "nats://%s-member.%s.svc:4222" (include "projection-recovery.fullname" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{- /*
The reference member's descriptor hash, computed exactly as the member does
(engine.Descriptor.Hash: SHA-256 of the canonical JSON, instruments sorted
and deduplicated): the local environment's selected run must carry it or
recovery refuses the scope. test/chart checks it against the Go function.
*/ -}}
{{- define "projection-recovery.local.instruments" -}}
{{- .Values.localEnvironment.member.instruments | sortAlpha | uniq | toJson -}}
{{- end -}}
{{- define "projection-recovery.local.descriptorHash" -}}
{{- printf "{\"protocolVersion\":1,\"engineId\":\"reference-engine-v1\",\"scope\":%s,\"instruments\":%s}" (toJson .Values.localEnvironment.scope) (include "projection-recovery.local.instruments" .) | sha256sum -}}
{{- end -}}
