{{/*
Object names are the release name (and "-config", "-triton"), so `helm install triton-sidecar --set mode=sidecar` and `helm install
infergate-fleet --set mode=fleet` name every object as deploy/kubernetes/ does.
*/}}

{{/* The pods' app name: Triton's pod in the sidecar shape, infergate's in the fleet. */}}
{{- define "infergate.appName" -}}
{{- if eq .Values.mode "sidecar" }}triton{{ else }}infergate{{ end -}}
{{- end }}

{{- define "infergate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "infergate.appName" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "infergate.labels" -}}
{{ include "infergate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{/* The gateway's config text: values.config, else the mode's default. */}}
{{- define "infergate.config" -}}
{{- if .Values.config }}{{ .Values.config }}
{{- else if eq .Values.mode "sidecar" }}{{ .Values.sidecarConfig }}
{{- else }}{{ .Values.fleetConfig }}{{ end -}}
{{- end }}

{{/* The infergate container, the same in both shapes but for its resources. */}}
{{- define "infergate.container" -}}
- name: infergate
  image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args: ["--config", "/etc/infergate/infergate.yaml"]
  ports:
    - { name: http, containerPort: {{ .Values.ports.http }} }
    - { name: grpc, containerPort: {{ .Values.ports.grpc }} }
    - { name: metrics, containerPort: {{ .Values.ports.metrics }} }
  readinessProbe:
    httpGet: { path: /v2/health/ready, port: http, scheme: {{ .Values.probeScheme }} }
    periodSeconds: 2
    failureThreshold: 2
  livenessProbe:
    httpGet: { path: /v2/health/live, port: http, scheme: {{ .Values.probeScheme }} }
    periodSeconds: 10
    failureThreshold: 3
  lifecycle:
    preStop:
      exec: { command: ["sleep", "{{ .Values.preStopSleepSeconds }}"] }
  resources:
    {{- if eq .Values.mode "sidecar" }}
    {{- toYaml .Values.sidecar.resources | nindent 4 }}
    {{- else }}
    {{- toYaml .Values.fleet.resources | nindent 4 }}
    {{- end }}
  volumeMounts:
    {{- if eq .Values.mode "sidecar" }}
    - { name: dshm, mountPath: /dev/shm }
    {{- end }}
    - { name: config, mountPath: /etc/infergate, readOnly: true }
    - { name: tls, mountPath: /var/run/secrets/infergate/tls, readOnly: true }
    - { name: api-keys, mountPath: /var/run/secrets/infergate/api-keys, readOnly: true }
  securityContext:
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities: { drop: [ALL] }
{{- end }}
