{{- define "sluice.fullname" -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: sluice
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sluice.labels" -}}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "sluice.pickerName" -}}
{{- printf "%s-epp" (include "sluice.fullname" .) -}}
{{- end -}}

{{- define "sluice.pickerLabels" -}}
app.kubernetes.io/name: sluice-epp
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sluice.pvcName" -}}
{{- .Values.model.pvc.claimName | default (printf "%s-models" (include "sluice.fullname" .)) -}}
{{- end -}}
