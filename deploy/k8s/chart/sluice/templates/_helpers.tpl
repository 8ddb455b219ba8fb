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

{{- /* The Secret holding the API keys file, or "" when the release has no key. */ -}}
{{- define "sluice.apiKeySecret" -}}
{{- $k := .Values.apiKey -}}
{{- if and $k.create $k.existingSecret -}}
{{- fail "apiKey: set existingSecret or create, not both" -}}
{{- else if $k.existingSecret -}}
{{- $k.existingSecret -}}
{{- else if $k.create -}}
{{- printf "%s-api-keys" (include "sluice.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- /* The file name of the keys inside the Secret. */ -}}
{{- define "sluice.apiKeyItem" -}}
{{- ternary "keys" .Values.apiKey.existingSecretKey .Values.apiKey.create -}}
{{- end -}}

{{- /* The Secret holding the reasoning seal key, or "" when the release has none. */ -}}
{{- define "sluice.sealKeySecret" -}}
{{- $k := .Values.reasoning.sealKey -}}
{{- if and $k.value $k.existingSecret -}}
{{- fail "reasoning.sealKey: set existingSecret or value, not both" -}}
{{- else if $k.existingSecret -}}
{{- if not $k.existingSecretKey -}}
{{- fail "reasoning.sealKey.existingSecretKey: the Secret's item holding the key is required" -}}
{{- end -}}
{{- $k.existingSecret -}}
{{- else if $k.value -}}
{{- /* serve trims the file and refuses under 32 bytes: refuse here, before a rollout of pods that cannot start. */ -}}
{{- if lt (len (trim (toString $k.value))) 32 -}}
{{- fail (printf "reasoning.sealKey.value: at least 32 bytes of secret, got %d" (len (trim (toString $k.value)))) -}}
{{- end -}}
{{- printf "%s-seal-key" (include "sluice.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- /* The item of the seal key inside its Secret. */ -}}
{{- define "sluice.sealKeyItem" -}}
{{- ternary "key" .Values.reasoning.sealKey.existingSecretKey (not .Values.reasoning.sealKey.existingSecret) -}}
{{- end -}}
