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
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "prewarm.image" -}}
{{ .repository }}:{{ .tag }}
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
{{- else }}
  hostPath:
    path: {{ .Values.prewarm.volume.hostPath.path }}
    type: {{ .Values.prewarm.volume.hostPath.type }}
{{- end }}
{{- end -}}

{{/* The limits as the prewarmer's environment (one place: the same values make vLLM's args). */}}
{{- define "prewarm.env" -}}
{{- $l := .Values.limits -}}
- name: PREWARM_MAX_NUM_SEQS
  value: {{ $l.maxNumSeqs | quote }}
- name: PREWARM_MAX_NUM_BATCHED_TOKENS
  value: {{ $l.maxNumBatchedTokens | quote }}
- name: PREWARM_MAX_MODEL_LEN
  value: {{ $l.maxModelLen | quote }}
- name: PREWARM_NUM_SPECULATIVE_TOKENS
  value: {{ $l.numSpeculativeTokens | quote }}
- name: PREWARM_MAX_CUDAGRAPH_CAPTURE_SIZE
  value: {{ $l.maxCudagraphCaptureSize | quote }}
- name: PREWARM_TENSOR_PARALLEL_SIZE
  value: {{ $l.tensorParallelSize | quote }}
- name: PREWARM_BLOCK_SIZE
  value: {{ $l.blockSize | quote }}
- name: PREWARM_KV_CACHE_DTYPE
  value: {{ $l.kvCacheDtype | quote }}
- name: PREWARM_GRAPH_ONLY
  value: {{ .Values.prewarm.graphOnly | quote }}
- name: PREWARM_ARCH
  value: {{ .Values.prewarm.arch | quote }}
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
{{- end }}
{{- if .Values.prewarm.modelConfigMap }}
- name: PREWARM_MODEL_CONFIG
  value: /etc/prewarm/model/config.json
{{- end }}
- name: PREWARM_LOG_FORMAT
  value: json
{{- end -}}

{{/* vLLM's arguments from the same limits. */}}
{{- define "prewarm.vllmArgs" -}}
{{- $l := .Values.limits -}}
- serve
- {{ .Values.vllm.model | quote }}
- --max-num-seqs
- {{ $l.maxNumSeqs | quote }}
- --max-num-batched-tokens
- {{ $l.maxNumBatchedTokens | quote }}
- --max-model-len
- {{ $l.maxModelLen | quote }}
- --tensor-parallel-size
- {{ $l.tensorParallelSize | quote }}
- --block-size
- {{ $l.blockSize | quote }}
- --kv-cache-dtype
- {{ $l.kvCacheDtype | quote }}
- -O
- {{ printf "{\"max_cudagraph_capture_size\":%v}" $l.maxCudagraphCaptureSize | quote }}
{{- if gt (int $l.numSpeculativeTokens) 0 }}
- --speculative-config
- {{ printf "{\"method\":\"mtp\",\"num_speculative_tokens\":%v}" $l.numSpeculativeTokens | quote }}
{{- end }}
- --port
- {{ .Values.vllm.port | quote }}
{{- range .Values.vllm.extraArgs }}
- {{ . | quote }}
{{- end }}
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
