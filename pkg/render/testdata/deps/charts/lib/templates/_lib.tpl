{{- define "lib.name" -}}
{{ .Chart.Name | trunc 20 }}
{{- end -}}
