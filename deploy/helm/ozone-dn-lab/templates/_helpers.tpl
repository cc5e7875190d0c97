{{/* The release's name prefix of every object (63 characters at most, as DNS labels are). */}}
{{- define "lab.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "lab.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "lab.dnSimSelector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: dn-sim
{{- end -}}

{{- define "lab.image" -}}
{{- $root := index . 0 -}}{{- $repo := index . 1 -}}
{{- if $root.Values.image.registry -}}
{{- printf "%s/%s:%s" $root.Values.image.registry $repo $root.Values.image.tag -}}
{{- else -}}
{{- printf "%s:%s" $repo $root.Values.image.tag -}}
{{- end -}}
{{- end -}}

{{/* loadgen's --target: the given list, or every dn-sim of the StatefulSet by its stable name. */}}
{{- define "lab.targets" -}}
{{- if .Values.loadgen.targets -}}
{{- join "," .Values.loadgen.targets -}}
{{- else if .Values.dnSim.enabled -}}
{{- $name := printf "%s-dn-sim" (include "lab.fullname" .) -}}
{{- $list := list -}}
{{- range $i := until (int .Values.dnSim.replicas) -}}
{{- $list = append $list (printf "%s-%d.%s.%s.svc:9859" $name $i $name $.Release.Namespace) -}}
{{- end -}}
{{- join "," $list -}}
{{- else -}}
{{- fail "loadgen needs loadgen.targets when dnSim.enabled is false" -}}
{{- end -}}
{{- end -}}

{{/* The instant every shard starts measuring: loadgen.startAt, or now + startDelaySeconds (UTC).
Computed once per rendering and kept on the root context (not in .Values, which a release
stores and `--reuse-values` would bring back): the Jobs' names, --start-at and the result file
names must all agree even when rendering crosses a second. */}}
{{- define "lab.startAt" -}}
{{- if not (hasKey . "labStartAt") -}}
{{- if .Values.loadgen.startAt -}}
{{- $_ := set . "labStartAt" .Values.loadgen.startAt -}}
{{- else -}}
{{- $_ := set . "labStartAt" (dateInZone "2006-01-02T15:04:05Z" (dateModify (printf "+%ds" (int .Values.loadgen.startDelaySeconds)) now) "UTC") -}}
{{- end -}}
{{- end -}}
{{- index . "labStartAt" -}}
{{- end -}}

{{/* The prefix of the Jobs' names, short enough that JOB-RUNID-INDEX stays a 63-character DNS label. */}}
{{- define "lab.jobPrefix" -}}
{{- include "lab.fullname" . | trunc 28 | trimSuffix "-" -}}
{{- end -}}

{{/* A name for this run's result files: the start instant without punctuation (20261203T180000Z). */}}
{{- define "lab.runId" -}}
{{- include "lab.startAt" . | replace "-" "" | replace ":" "" | replace "." "" | lower -}}
{{- end -}}

{{/* The workload's arguments: loadgen.args, or the chart's own files/loadgen-args. */}}
{{- define "lab.workloadArgs" -}}
{{- if .Values.loadgen.args -}}
{{- toYaml .Values.loadgen.args -}}
{{- else -}}
{{- $lines := list -}}
{{- range (.Files.Get "files/loadgen-args" | splitList "\n") -}}
{{- if . -}}{{- $lines = append $lines . -}}{{- end -}}
{{- end -}}
{{- toYaml $lines -}}
{{- end -}}
{{- end -}}

{{- define "lab.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "lab.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}
