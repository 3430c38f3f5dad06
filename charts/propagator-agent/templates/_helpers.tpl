{{- define "agent.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "agent.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "agent.labels" -}}
{{ include "agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The allowed kinds as the agent names them: Kind, or Kind.group. */}}
{{- define "agent.kinds" -}}
{{- $names := list -}}
{{- range .Values.allow.kinds -}}
{{- $names = append $names (ternary .kind (printf "%s.%s" .kind .group) (eq .group "")) -}}
{{- end -}}
{{- join "," $names -}}
{{- end -}}

{{/* The allowed kinds' rules, all verbs a sync uses; and what a sync reads besides: the
member's own autoscalers (their replicas are left to them). */}}
{{- define "agent.writeRules" -}}
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [get, list, watch]
{{- range .Values.allow.kinds }}
{{- if ne .kind "Namespace" }}
- apiGroups: [{{ .group | quote }}]
  resources: [{{ .resource }}]
  verbs: [get, list, watch, create, patch, update, delete]
{{- end }}
{{- end }}
{{- end -}}
