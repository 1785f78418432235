{{- define "type_members" -}}
{{- $field := . -}}
{{- if eq $field.Name "metadata" -}}
Refer to Kubernetes API documentation for fields of `metadata`.
{{- else -}}
{{ markdownRenderFieldDoc $field.Doc }}
{{- end -}}
{{- end -}}

{{- /* field_validation lists a field's schema rules and the messages of its CEL rules. */ -}}
{{- define "field_validation" -}}
{{- $field := . -}}
{{- if index $field.Markers "required" -}}Required <br />{{- end -}}
{{- range $field.Validation -}}
{{- if not (or (hasPrefix "Optional" .) (hasPrefix "Required" .)) -}}
{{ markdownRenderFieldDoc . }} <br />
{{- end -}}
{{- end -}}
{{- range (index $field.Markers "kubebuilder:validation:XValidation") -}}
{{ markdownRenderFieldDoc .Message }} <br />
{{- end -}}
{{- end -}}
