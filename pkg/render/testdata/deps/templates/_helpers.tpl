{{- define "deps.fullname" -}}
{{ include "lib.name" . }}-{{ .Release.Name }}
{{- end -}}
