{{/*
The labels every object carries: the Kustomize base's (app.kubernetes.io/name when given,
app.kubernetes.io/part-of) and Helm's own (which tests/e2e/helm.rs drops before comparing).
Call with (dict "ctx" $ "name" "muster"); "name" may be empty; "noPartOf" true leaves out
part-of (as on the second scheduler's ConfigMap, which Kustomize generates without labels).
*/}}
{{- define "muster.labels" -}}
{{- if .name -}}
app.kubernetes.io/name: {{ .name }}
{{ end -}}
{{- if not .noPartOf -}}
app.kubernetes.io/part-of: muster
{{ end -}}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The namespace muster and the second scheduler run in. */}}
{{- define "muster.namespace" -}}
{{ required "namespace.name must be set" .Values.namespace.name }}
{{- end }}

{{/* Whether cert-manager issues the certificates. */}}
{{- define "muster.certManager" -}}
{{- if eq .Values.certificates "cert-manager" }}true{{ end }}
{{- end }}

{{/*
The schedulerNames whose kube-scheduler calls muster, as a JSON list: .Values.schedulerNames, or
when empty the scheduler schedulerMode wires muster into (default-scheduler, or the second
scheduler muster-scheduler). The admission policy marks only their pods; muster gets the same
names (--scheduler-names, by its environment variable as deploy/README.md has users set it).
*/}}
{{- define "muster.schedulerNames" -}}
{{- if .Values.schedulerNames -}}
{{ toJson .Values.schedulerNames }}
{{- else if eq .Values.schedulerMode "second-scheduler" -}}
["muster-scheduler"]
{{- else -}}
["default-scheduler"]
{{- end -}}
{{- end }}
