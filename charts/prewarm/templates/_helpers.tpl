{{- define "prewarm.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "prewarm.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "prewarm.labels" -}}
{{ include "prewarm.selectorLabels" . }}
{{ include "prewarm.releaseLabels" . }}
{{- end -}}

{{- define "prewarm.releaseLabels" -}}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Labels of the chart's other pods (the prefill Job's, the helm test's): the release and their
component, but not app.kubernetes.io/name, so the Service, the Deployment and the PodMonitor
(which select on prewarm.selectorLabels) never pick them up. Takes (list $ "component"). */}}
{{- define "prewarm.componentLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/part-of: {{ $.Chart.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "prewarm.image" -}}
{{ .repository }}:{{ .tag }}
{{- end -}}

{{/* prewarm.arch as the prewarmer's --arch takes it: a list joined with commas. */}}
{{- define "prewarm.arch" -}}
{{- $arch := .Values.prewarm.arch -}}
{{- if kindIs "slice" $arch }}{{ join "," $arch }}{{ else }}{{ $arch }}{{ end -}}
{{- end -}}

{{- define "prewarm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "prewarm.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* What every pod of the chart shares: its service account, whether its token is mounted,
the secrets its images are pulled with. */}}
{{- define "prewarm.podCommon" -}}
serviceAccountName: {{ include "prewarm.serviceAccountName" . }}
automountServiceAccountToken: {{ .Values.serviceAccount.automountToken }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Where a pod may run: nodeSelector, tolerations, affinity of the dict given. */}}
{{- define "prewarm.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* An image volume's cache is keyed by the compiler identity of the prewarm image that filled it:
any other prewarmer finds none of its keys and the pod never becomes ready. When
prewarm.volume.image.packedBy names that image, a different prewarmer image is an error here. */}}
{{- define "prewarm.checkPackedBy" -}}
{{- $packedBy := .Values.prewarm.volume.image.packedBy | default "" -}}
{{- $prewarmer := include "prewarm.image" .Values.prewarm.image -}}
{{- if and $packedBy (ne $packedBy $prewarmer) -}}
{{- fail (printf "prewarm.volume.image.packedBy (%s) is not the prewarmer image (%s): every key in the cache image %s carries the packing image's compiler identity, so this prewarmer would find none and the pod would never become ready. Set prewarm.image.repository and prewarm.image.tag to the image that packed it, or repack the cache with this one" $packedBy $prewarmer .Values.prewarm.volume.image.reference) -}}
{{- end -}}
{{- end -}}

{{/* One monitor at most (both would scrape the server's pods twice: every series doubled, under
two job labels), and a ServiceMonitor needs the Service it selects. */}}
{{- define "prewarm.checkMonitors" -}}
{{- if and .Values.serviceMonitor.enabled .Values.podMonitor.enabled -}}
{{- fail "serviceMonitor.enabled and podMonitor.enabled: choose one; both would scrape the same pods, so every prewarm series would be there twice" -}}
{{- end -}}
{{- if and .Values.serviceMonitor.enabled (not .Values.service.enabled) -}}
{{- fail "serviceMonitor.enabled needs service.enabled (a ServiceMonitor scrapes through the Service); without a Service use podMonitor.enabled" -}}
{{- end -}}
{{- end -}}

{{/* The volume name and claim of the cache. */}}
{{- define "prewarm.claimName" -}}
{{- default (printf "%s-cache" (include "prewarm.fullname" .)) .Values.prewarm.volume.pvc.existingClaim -}}
{{- end -}}

{{- define "prewarm.cacheVolume" -}}
- name: cache
{{- if eq .Values.prewarm.volume.kind "emptyDir" }}
  emptyDir:
    sizeLimit: {{ .Values.prewarm.volume.emptyDir.sizeLimit }}
{{- else if eq .Values.prewarm.volume.kind "pvc" }}
  persistentVolumeClaim:
    claimName: {{ include "prewarm.claimName" . }}
{{- else if eq .Values.prewarm.volume.kind "image" }}
  image:
    reference: {{ required "prewarm.volume.kind=image needs prewarm.volume.image.reference: the cache image that prewarm pack made" .Values.prewarm.volume.image.reference | quote }}
    pullPolicy: {{ .Values.prewarm.volume.image.pullPolicy }}
{{- include "prewarm.checkPackedBy" . }}
{{- else }}
  hostPath:
    path: {{ .Values.prewarm.volume.hostPath.path }}
    type: {{ .Values.prewarm.volume.hostPath.type }}
{{- end }}
{{- end -}}

{{/*
vLLM's command line, built once, as a JSON list of words: "vllm", "serve", the model, the chart's
limits as flags, --port, then vllm.extraArgs. The server runs exactly these words and the
prewarmer reads exactly these words (PREWARM_VLLM_ARGS, parsed as vLLM parses them), so no flag
can reach one and not the other. A flag that extraArgs give, in any spelling (-tp or
--tensor-parallel-size, --max_model_len=N, --speculative-config.num_speculative_tokens=2), drops
the chart's flag for the same setting, so each is given once: --num-speculative-tokens drops the
chart's --speculative-config; -O/-cc/--compilation-config with a JSON object or a dotted field,
--cuda-graph-sizes and --max-cudagraph-capture-size drop its --compilation-config (an
optimization level, -O3 or -O 3, does not).
*/}}
{{- define "prewarm.vllmCommand" -}}
{{- $l := .Values.limits | default dict -}}
{{- $extra := .Values.vllm.extraArgs | default list -}}
{{- $alias := dict "tp" "tensor-parallel-size" "dcp" "decode-context-parallel-size"
  "O" "compilation-config" "cc" "compilation-config" "cuda-graph-sizes" "compilation-config"
  "max-cudagraph-capture-size" "compilation-config" "num-speculative-tokens" "speculative-config" -}}
{{- $given := dict -}}
{{- range $i, $w := $extra -}}
{{- if and (hasPrefix "-" $w) (not (regexMatch "^-[0-9.]" $w)) -}}
{{- $body := $w | trimPrefix "-" | trimPrefix "-" -}}
{{- $value := "" -}}
{{- if contains "=" $body -}}
{{- $value = regexReplaceAll "^[^=]*=" $body "" -}}
{{- $body = regexReplaceAll "=.*$" $body "" -}}
{{- else if lt (add1 $i) (len $extra) -}}
{{- $value = index $extra (add1 $i) -}}
{{- end -}}
{{- $dotted := contains "." $body -}}
{{- $flag := regexReplaceAll "[.].*$" $body "" | replace "_" "-" -}}
{{- $level := and (has $flag (list "O" "cc" "compilation-config")) (not $dotted) (not (hasPrefix "{" $value)) -}}
{{- if not $level -}}
{{- $_ := set $given (get $alias $flag | default $flag) true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* A limit the user leaves unset (null, the default) puts no flag on the line: vLLM and the
prewarmer then both take vLLM's own default (the prewarmer follows vLLM's GPU-class defaults). */ -}}
{{- $isSet := dict -}}
{{- range $k, $v := $l -}}
{{- if not (kindIs "invalid" $v) }}{{ $_ := set $isSet $k true }}{{ end -}}
{{- end -}}
{{- $tp := ternary (int64 (get $l "tensorParallelSize" | default 1)) 1 (hasKey $isSet "tensorParallelSize") -}}
{{- $dcp := ternary (int64 (get $l "decodeContextParallelSize" | default 1)) 1 (hasKey $isSet "decodeContextParallelSize") -}}
{{- if and (not (hasKey $given "tensor-parallel-size")) (not (hasKey $given "decode-context-parallel-size")) (ne (mod $tp $dcp) 0) -}}
{{- fail (printf "limits.decodeContextParallelSize (%d) must divide limits.tensorParallelSize (%d%s): vLLM splits a decode's context over dcp of the tp ranks" $dcp $tp (ternary "" ", vLLM's default: it is unset" (hasKey $isSet "tensorParallelSize"))) -}}
{{- end -}}
{{- $own := list -}}
{{- range (list (list "maxNumSeqs" "max-num-seqs") (list "maxNumBatchedTokens" "max-num-batched-tokens") (list "maxModelLen" "max-model-len") (list "tensorParallelSize" "tensor-parallel-size") (list "decodeContextParallelSize" "decode-context-parallel-size") (list "blockSize" "block-size") (list "kvCacheDtype" "kv-cache-dtype")) -}}
{{- $v := get $l (index . 0) -}}
{{- if hasKey $isSet (index . 0) -}}
{{- /* Numbers a values file gives as floats (1e+06) go on the line as integers; maxModelLen may be
auto or 32K, kvCacheDtype is a word: strings go on the line as they are. */ -}}
{{- $own = append $own (list (index . 1) (ternary $v (int64 $v | toString) (kindIs "string" $v))) -}}
{{- end -}}
{{- end -}}
{{- if hasKey $isSet "maxCudagraphCaptureSize" -}}
{{- $own = append $own (list "compilation-config" (printf "{\"max_cudagraph_capture_size\":%d}" (int64 $l.maxCudagraphCaptureSize))) -}}
{{- end -}}
{{- if and (hasKey $isSet "numSpeculativeTokens") (gt (int64 (get $l "numSpeculativeTokens" | default 0)) 0) -}}
{{- $own = append $own (list "speculative-config" (printf "{\"method\":\"mtp\",\"num_speculative_tokens\":%d}" (int64 $l.numSpeculativeTokens))) -}}
{{- end -}}
{{- $own = append $own (list "port" (int64 .Values.vllm.port | toString)) -}}
{{- $words := list "vllm" "serve" (toString .Values.vllm.model) -}}
{{- range $own -}}
{{- if not (hasKey $given (index . 0)) -}}
{{- $words = concat $words (list (printf "--%s" (index . 0)) (index . 1)) -}}
{{- end -}}
{{- end -}}
{{- concat $words $extra | toJson -}}
{{- end -}}

{{/* The same words as one shell-quoted line (single quotes where a word needs them), the form
PREWARM_VLLM_ARGS and `prewarm --vllm-args` read. */}}
{{- define "prewarm.vllmLine" -}}
{{- $quoted := list -}}
{{- range (include "prewarm.vllmCommand" . | fromJsonArray) -}}
{{- if regexMatch "^[A-Za-z0-9_./:=@%+,-]+$" . -}}
{{- $quoted = append $quoted . -}}
{{- else -}}
{{- $quoted = append $quoted (printf "'%s'" (replace "'" "'\\''" .)) -}}
{{- end -}}
{{- end -}}
{{- join " " $quoted -}}
{{- end -}}

{{/* The prewarmer's environment. Its limits come only from PREWARM_VLLM_ARGS, vLLM's own
command line: a PREWARM_<LIMIT> variable would outrank the line and let the two drift. */}}
{{- define "prewarm.env" -}}
- name: PREWARM_VLLM_ARGS
  value: {{ include "prewarm.vllmLine" . | quote }}
- name: PREWARM_GRAPH_ONLY
  value: {{ .Values.prewarm.graphOnly | quote }}
- name: PREWARM_ARCH
  value: {{ include "prewarm.arch" . | quote }}
- name: PREWARM_JOBS
  value: {{ .Values.prewarm.jobs | quote }}
- name: PREWARM_CACHE_DIR
  value: {{ .Values.prewarm.cacheDir | quote }}
- name: PREWARM_METRICS_ADDRESS
  value: {{ printf "0.0.0.0:%v" .Values.prewarm.metricsPort | quote }}
- name: PREWARM_GRPC_ADDRESS
  value: {{ printf "0.0.0.0:%v" .Values.prewarm.grpcPort | quote }}
- name: PREWARM_VERIFY_INTERVAL
  value: {{ .Values.prewarm.verifyInterval | quote }}
{{- if .Values.prewarm.pushgateway }}
- name: PREWARM_PUSHGATEWAY
  value: {{ .Values.prewarm.pushgateway | quote }}
{{- /* A push replaces its group: each pod pushes to its own, named as kube-state-metrics and
the Prometheus Operator name a pod's series (the dashboard filters on namespace). */}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: PREWARM_PUSHGATEWAY_GROUP
  value: namespace=$(POD_NAMESPACE),pod=$(POD_NAME)
{{- end }}
{{- if .Values.prewarm.modelConfigMap }}
- name: PREWARM_MODEL_CONFIG
  value: /etc/prewarm/model/config.json
{{- end }}
- name: PREWARM_LOG_FORMAT
  value: json
{{- end -}}

{{/* The cache directories of every JIT in the serving container, all in the volume. */}}
{{- define "prewarm.cacheEnv" -}}
{{- $jit := ternary .Values.prewarm.jitCacheDir .Values.prewarm.cacheDir (include "prewarm.readOnlyCache" . | eq "true") -}}
- name: PREWARM_CACHE_DIR
  value: {{ .Values.prewarm.cacheDir | quote }}
- name: FLYDSL_RUNTIME_CACHE_DIR
  value: {{ printf "%s/flydsl" $jit | quote }}
- name: TRITON_CACHE_DIR
  value: {{ printf "%s/triton" $jit | quote }}
{{- end -}}

{{/* "true" when the cache volume is an image: read-only, verified, never compiled into. */}}
{{- define "prewarm.readOnlyCache" -}}
{{- eq .Values.prewarm.volume.kind "image" -}}
{{- end -}}

{{/* The prewarm container; `sidecar` adds restartPolicy Always and the probes. */}}
{{- define "prewarm.container" -}}
{{- $sidecar := eq .Values.prewarm.mode "sidecar" -}}
{{- $readOnly := include "prewarm.readOnlyCache" . | eq "true" -}}
{{- $command := ternary "verify" "run" $readOnly -}}
- name: prewarm
  image: {{ include "prewarm.image" .Values.prewarm.image }}
  imagePullPolicy: {{ .Values.prewarm.image.pullPolicy }}
  {{- if $sidecar }}
  restartPolicy: Always
  args: [{{ $command | quote }}, "--serve"]
  {{- else }}
  args: [{{ $command | quote }}]
  {{- end }}
  env:
    {{- include "prewarm.env" . | nindent 4 }}
  ports:
    - name: metrics
      containerPort: {{ .Values.prewarm.metricsPort }}
    - name: grpc
      containerPort: {{ .Values.prewarm.grpcPort }}
  {{- if $sidecar }}
  startupProbe:
    grpc:
      port: {{ .Values.prewarm.grpcPort }}
      service: prewarm
    periodSeconds: {{ .Values.prewarm.startupProbe.periodSeconds }}
    failureThreshold: {{ .Values.prewarm.startupProbe.failureThreshold }}
  readinessProbe:
    grpc:
      port: {{ .Values.prewarm.grpcPort }}
      service: prewarm
    periodSeconds: 10
  {{- end }}
  resources:
    {{- toYaml (ternary .Values.prewarm.resources.sidecar .Values.prewarm.resources.init $sidecar) | nindent 4 }}
  securityContext:
    {{- toYaml .Values.prewarmSecurityContext | nindent 4 }}
  volumeMounts:
    - name: cache
      mountPath: {{ .Values.prewarm.cacheDir }}
      {{- if $readOnly }}
      readOnly: true
      {{- end }}
    - name: tmp
      mountPath: /tmp
    {{- if .Values.prewarm.modelConfigMap }}
    - name: model-config
      mountPath: /etc/prewarm/model
      readOnly: true
    {{- end }}
{{- end -}}
