{{/* Chart name. */}}
{{- define "hookgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified name prefix; role suffixes are appended, so keep room for them. */}}
{{- define "hookgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "hookgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "hookgate.labels" -}}
helm.sh/chart: {{ include "hookgate.chart" . }}
app.kubernetes.io/name: {{ include "hookgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hookgate
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of one role: include "hookgate.selectorLabels" (list . "receiver") */}}
{{- define "hookgate.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "hookgate.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* All labels of one role's objects: include "hookgate.componentLabels" (list . "receiver") */}}
{{- define "hookgate.componentLabels" -}}
{{ include "hookgate.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* The image reference: digest wins over tag; the tag defaults to appVersion. */}}
{{- define "hookgate.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* ServiceAccount name of one role: include "hookgate.serviceAccountName" (list . "receiver") */}}
{{- define "hookgate.serviceAccountName" -}}
{{- $root := index . 0 -}}
{{- $role := index . 1 -}}
{{- $sa := (index $root.Values $role).serviceAccount -}}
{{- if $sa.create -}}
{{ default (printf "%s-%s" (include "hookgate.fullname" $root) $role) $sa.name }}
{{- else -}}
{{ required (printf "%s.serviceAccount.name is required when %s.serviceAccount.create is false" $role $role) $sa.name }}
{{- end -}}
{{- end }}

{{/*
The Secret holding the database URL, and its key. Fails rendering unless exactly one of
database.existingSecret and database.url is set.
*/}}
{{- define "hookgate.databaseSecretName" -}}
{{- $db := .Values.database -}}
{{- if and $db.existingSecret $db.url -}}
{{- fail "hookgate: set only one of database.existingSecret and database.url, not both" -}}
{{- else if $db.existingSecret -}}
{{ $db.existingSecret }}
{{- else if $db.url -}}
{{ include "hookgate.fullname" . }}-database
{{- else -}}
{{- fail "hookgate: no database configured. Set database.existingSecret to a Secret with the PostgreSQL URL under the key DATABASE_URL (production), or database.url to the URL itself (the chart then renders the Secret), e.g. --set database.url=postgres://hookgate:PASSWORD@postgres:5432/hookgate" -}}
{{- end -}}
{{- end }}

{{- define "hookgate.databaseSecretKey" -}}
{{- if .Values.database.existingSecret -}}
{{ .Values.database.existingSecretKey }}
{{- else -}}
DATABASE_URL
{{- end -}}
{{- end }}

{{/* HOOKGATE_DATABASE_URL from the database Secret (env, never an argument: no password in ps). */}}
{{- define "hookgate.databaseEnv" -}}
- name: HOOKGATE_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "hookgate.databaseSecretName" . }}
      key: {{ include "hookgate.databaseSecretKey" . }}
{{- end }}

{{/*
The database flags of one role ("controller", "receiver" or "worker"): the chart's deadlines, and
the role's own pool cap (<role>.database.maxConnections) or else the chart's (database.maxConnections).
*/}}
{{- define "hookgate.databaseArgs" -}}
{{- $root := index . 0 -}}
{{- $d := $root.Values.database -}}
{{- $own := dig "database" "maxConnections" nil (index $root.Values (index . 1)) -}}
{{ include "hookgate.durationFlag" (list "--db-acquire-timeout" "database.acquireTimeout" $d.acquireTimeout) }}
{{ include "hookgate.durationFlag" (list "--db-statement-timeout" "database.statementTimeout" $d.statementTimeout) }}
- --db-max-connections
- {{ (kindIs "invalid" $own | ternary $d.maxConnections $own) | quote }}
{{- end }}

{{/*
The range of every duration flag the chart passes, both ends included: a copy of the binary's
(src/cli/args/bounds.rs), which tests/it/crd.rs keeps equal. A value outside it would stop the pod
at start; checking it here fails `helm install` instead, naming the value.
*/}}
{{- define "hookgate.durationRanges" -}}
--db-acquire-timeout: [100ms, 1d]
--db-statement-timeout: [10ms, 1d]
--header-timeout: [1ms, 1h]
--body-timeout: [1ms, 1h]
--commit-window: [0s, 1s]
--dedupe-cache-ttl: [0s, 30d]
--lease: [1s, 1d]
--poll: [10ms, 1h]
--grace: [0s, 1h]
{{- end }}

{{/*
A duration in nanoseconds, as a float (exact up to 104 days; the ranges end well before): the
units the schema's duration patterns allow, summed over groups as in 1h30m.
*/}}
{{- define "hookgate.nanoseconds" -}}
{{- $unit := dict "ns" 1.0 "us" 1e3 "ms" 1e6 "s" 1e9 "m" 6e10 "h" 3.6e12 "d" 8.64e13 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9]+[a-z]+" (toString .) -1 -}}
{{- $n := regexFind "^[0-9]+" . -}}
{{- $u := trimPrefix $n . -}}
{{- if not (hasKey $unit $u) -}}
{{- fail (printf "hookgate chart: %q is not a duration of ns, us, ms, s, m, h or d" .) -}}
{{- end -}}
{{- $total = addf $total (mulf (float64 $n) (get $unit $u)) -}}
{{- end -}}
{{- $total -}}
{{- end }}

{{/*
A duration flag and its value, as two args: (list "--flag" "values.key" value). Fails the render
when the value is outside the flag's range, with the binary's wording and the value's name.
*/}}
{{- define "hookgate.durationFlag" -}}
{{- $flag := index . 0 -}}
{{- $key := index . 1 -}}
{{- $value := toString (index . 2) -}}
{{- $range := get (include "hookgate.durationRanges" . | fromYaml) $flag -}}
{{- if not $range -}}
{{- fail (printf "hookgate chart: %s has no range in hookgate.durationRanges" $flag) -}}
{{- end -}}
{{- $ns := include "hookgate.nanoseconds" $value | float64 -}}
{{- $min := include "hookgate.nanoseconds" (index $range 0) | float64 -}}
{{- $max := include "hookgate.nanoseconds" (index $range 1) | float64 -}}
{{- if or (lt $ns $min) (gt $ns $max) -}}
{{- fail (printf "%s must be from %s to %s, got %s (the pods' %s would refuse it at start)" $key (index $range 0) (index $range 1) $value $flag) -}}
{{- end -}}
- {{ $flag }}
- {{ $value | quote }}
{{- end }}

{{/* Environment shared by the long-running roles. */}}
{{- define "hookgate.commonEnv" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: HOOKGATE_LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
- name: RUST_LOG
  value: {{ .Values.logLevel | quote }}
{{- end }}

{{/* Pod-level hardening. */}}
{{- define "hookgate.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Container-level hardening. */}}
{{- define "hookgate.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* topologySpreadConstraints of one role: include "hookgate.topologySpread" (list . "receiver") */}}
{{- define "hookgate.topologySpread" -}}
{{- $root := index . 0 -}}
{{- $role := index . 1 -}}
{{- $own := (index $root.Values $role).topologySpreadConstraints -}}
{{- if $own -}}
topologySpreadConstraints:
  {{- toYaml $own | nindent 2 }}
{{- else if $root.Values.topologySpread.enabled -}}
topologySpreadConstraints:
{{- range $root.Values.topologySpread.topologyKeys }}
  - topologyKey: {{ . }}
    maxSkew: {{ $root.Values.topologySpread.maxSkew }}
    whenUnsatisfiable: {{ $root.Values.topologySpread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "hookgate.selectorLabels" (list $root $role) | nindent 8 }}
    matchLabelKeys:
      - pod-template-hash
{{- end }}
{{- end -}}
{{- end }}

{{/* Scheduling fields of one role's pods. */}}
{{- define "hookgate.scheduling" -}}
{{- $root := index . 0 -}}
{{- $role := index . 1 -}}
{{- $v := index $root.Values $role -}}
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with include "hookgate.topologySpread" (list $root $role) }}
{{ . }}
{{- end }}
{{- end }}

{{/* A small writable /tmp: the root filesystem is read-only. */}}
{{- define "hookgate.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 16Mi
{{- end }}

{{/*
Pod annotations of one role: the role's podAnnotations, plus a checksum of database.url when the
pods read it, so that changing the URL rolls them. include "hookgate.podAnnotations" (list . "receiver" true)
*/}}
{{- define "hookgate.podAnnotations" -}}
{{- $root := index . 0 -}}
{{- $role := index . 1 -}}
{{- $usesDb := index . 2 -}}
{{- $ann := dict -}}
{{- if and $usesDb $root.Values.database.url -}}
{{- $_ := set $ann "checksum/database" ($root.Values.database.url | sha256sum) -}}
{{- end -}}
{{- $ann = merge $ann ((index $root.Values $role).podAnnotations | default dict) -}}
{{- with $ann -}}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end }}

{{/*
checkov skip annotations, for the security scan in tests/chart/run.sh: one "CHECK_ID=reason" per
entry. Each reason says why the finding does not apply. include "hookgate.checkovSkips" (list "CKV_K8S_8=...")
*/}}
{{- define "hookgate.checkovSkips" -}}
{{- range $i, $skip := . }}
{{- if $i }}{{ "\n" }}{{ end -}}
checkov.io/skip{{ add1 $i }}: {{ $skip | quote }}
{{- end }}
{{- end }}

{{/* Skips shared by every hookgate pod that reads the database URL. */}}
{{- define "hookgate.commonSkips" -}}
{{- $skips := list "CKV_K8S_35=hookgate reads the database URL only from --database-url or HOOKGATE_DATABASE_URL (no file option), so the Secret is passed as an env var, never as an argument" -}}
{{- if not .Values.image.digest -}}
{{- $skips = append $skips "CKV_K8S_43=the digest exists only once the image is pushed: set image.digest (values-production.yaml says so); the tag is pinned to the appVersion meanwhile" -}}
{{- end -}}
{{- toJson $skips -}}
{{- end }}

{{/*
A PromQL label selector: the release's matchers (metrics.prometheusRule.selector, rendered) and
an alert's own, either of which may be empty: include "hookgate.promSelector" (list $sel "le=\"1\"")
*/}}
{{- define "hookgate.promSelector" -}}
{{- $parts := list -}}
{{- range . }}{{ if . }}{{ $parts = append $parts . }}{{ end }}{{ end -}}
{{- printf "{%s}" (join "," $parts) -}}
{{- end }}

{{/*
`for`, labels and the start of the annotations of one alert, whose values are the alert's block
under metrics.prometheusRule.alerts: include "hookgate.alertMeta" (list $ .oldestPending "anchor").
The caller continues the annotations (summary, description) at the same indentation.
*/}}
{{- define "hookgate.alertMeta" -}}
{{- $root := index . 0 -}}
{{- $alert := index . 1 -}}
{{- $pr := $root.Values.metrics.prometheusRule -}}
for: {{ $alert.for }}
labels:
  severity: {{ $alert.severity }}
  {{- with $pr.alertLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  runbook_url: {{ printf "%s#%s" $pr.runbookUrl (index . 2) | quote }}
{{- end }}
