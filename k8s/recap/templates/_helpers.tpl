{{/*
Names, labels and the pieces every role's pod shares. The roles are the commands of the
one `recap` binary: projector, query-api, mcp, and migrate (the pre-install/pre-upgrade
hook). Each Deployment is rendered by "recap.deployment" from its values block.
*/}}

{{- define "recap.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "recap.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "<fullname>-<role>", e.g. recap-query-api. Call with (dict "root" $ "role" "query-api"). */}}
{{- define "recap.roleName" -}}
{{- printf "%s-%s" (include "recap.fullname" .root) .role | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "recap.selectorLabels" -}}
app.kubernetes.io/name: {{ include "recap.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "recap.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "recap.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: recap
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "recap.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "recap.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "recap.image" -}}
{{- $image := .Values.image -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
Values that must hold together; rendering stops with the reason when they do not.
*/}}
{{- define "recap.validate" -}}
{{- $projector := .Values.projector -}}
{{- if and $projector.enabled (gt (int $projector.replicas) (int .Values.kafka.partitions)) -}}
{{- fail (printf "projector.replicas (%d) must not exceed kafka.partitions (%d): a consumer group gives each partition to one member, so extra projectors would sit idle while holding a pod's resources" (int $projector.replicas) (int .Values.kafka.partitions)) -}}
{{- end -}}
{{- $webhooks := .Values.webhooks -}}
{{- if $webhooks.enabled -}}
{{- $most := ternary (int $webhooks.autoscaling.maxReplicas) (int $webhooks.replicas) (and $webhooks.autoscaling $webhooks.autoscaling.enabled) -}}
{{- if gt $most (int .Values.kafka.messagePartitions) -}}
{{- fail (printf "webhooks replicas (up to %d) must not exceed kafka.messagePartitions (%d): each pod delivers the partitions it holds, so extra pods would sit idle" $most (int .Values.kafka.messagePartitions)) -}}
{{- end -}}
{{- end -}}
{{- if lt (int .Values.kafka.partitions) 1 -}}
{{- fail "kafka.partitions must be at least 1 (the partition count of the least-partitioned topic the projector consumes)" -}}
{{- end -}}
{{- if and .Values.redis.url (regexMatch "^[a-z]+://[^/]*@" .Values.redis.url) -}}
{{- fail "redis.url embeds credentials: it is rendered into a ConfigMap. Put the URL in a Secret (redis.existingSecret) or only the password (redis.passwordSecret)" -}}
{{- end -}}
{{- if and .Values.redis.existingSecret .Values.redis.passwordSecret -}}
{{- fail "set either redis.existingSecret (the whole URL) or redis.passwordSecret (the password only), not both" -}}
{{- end -}}
{{- if and .Values.queryApi.enabled (not .Values.cursorSecret.existingSecret) -}}
{{- fail "cursorSecret.existingSecret is required: every query-api replica signs cursors with the key it holds" -}}
{{- end -}}
{{- $grace := int .Values.drain.terminationGracePeriodSeconds -}}
{{- if le $grace (int .Values.drain.preStopSleepSeconds) -}}
{{- fail "drain.terminationGracePeriodSeconds must exceed drain.preStopSleepSeconds: the drain runs in what is left after the sleep" -}}
{{- end -}}
{{- if and .Values.ingress.enabled (not .Values.ingress.host) -}}
{{- fail "ingress.host is required when ingress.enabled is true" -}}
{{- end -}}
{{- end -}}

{{/* The public MCP URL: mcp.publicUrl, else https://<ingress.host>/mcp when the Ingress is on. */}}
{{- define "recap.mcpPublicUrl" -}}
{{- if .Values.mcp.publicUrl -}}
{{- .Values.mcp.publicUrl -}}
{{- else if and .Values.ingress.enabled .Values.ingress.host -}}
{{- printf "https://%s/mcp" .Values.ingress.host -}}
{{- end -}}
{{- end -}}

{{/*
Store settings as environment variables. Deployments read them from the ConfigMap; the
migrate hook lists them inline because hooks run before the ConfigMap exists.
*/}}
{{- define "recap.scyllaEnvMap" -}}
RECAP_SCYLLA_NODES: {{ join "," .Values.scylla.nodes | quote }}
RECAP_SCYLLA_KEYSPACE: {{ .Values.scylla.keyspace | quote }}
RECAP_SCYLLA_CONSISTENCY: {{ .Values.scylla.consistency | quote }}
RECAP_STORE_TIMEOUT_MS: {{ .Values.scylla.storeTimeoutMs | quote }}
RECAP_SCYLLA_WRITE_CONCURRENCY: {{ .Values.scylla.writeConcurrency | quote }}
RECAP_LOG: {{ .Values.log | quote }}
{{- end -}}

{{/*
Environment every Deployment's container gets besides the ConfigMap: the pod's identity
for OpenTelemetry, the secrets, and extraEnv. Call with (dict "root" $ "role" "query-api").
*/}}
{{- define "recap.env" -}}
{{- $root := .root -}}
{{- $values := $root.Values -}}
- name: K8S_POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: K8S_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- if or (eq .role "query-api") (eq .role "mcp") }}
- name: RECAP_CURSOR_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ $values.cursorSecret.existingSecret }}
      key: {{ $values.cursorSecret.key }}
{{- end }}
{{- /* Redis: query-api's rate limits and quotas, mcp's registration limits. */}}
{{- if or (eq .role "query-api") (eq .role "mcp") }}
{{- if $values.redis.existingSecret }}
- name: RECAP_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ $values.redis.existingSecret }}
      key: {{ $values.redis.urlKey }}
{{- else if $values.redis.passwordSecret }}
- name: RECAP_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $values.redis.passwordSecret }}
      key: {{ $values.redis.passwordKey }}
{{- /* Kubernetes expands $(VAR) from variables defined earlier in the list. */}}
- name: RECAP_REDIS_URL
  value: {{ regexReplaceAll "^([a-z]+://)" (required "redis.url is required with redis.passwordSecret" $values.redis.url) "${1}:$$(RECAP_REDIS_PASSWORD)@" | quote }}
{{- end }}
{{- end }}
{{- with (include "recap.scyllaSecretEnv" $root | trim) }}
{{ . }}
{{- end }}
{{- if $values.otel.endpoint }}
- name: OTEL_SERVICE_NAME
  value: {{ printf "recap-%s" .role | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ printf "service.namespace=recap,service.version=%s,k8s.namespace.name=$(K8S_NAMESPACE),k8s.pod.name=$(K8S_POD_NAME)%s" (default $root.Chart.AppVersion $values.image.tag) (ternary (printf ",%s" $values.otel.resourceAttributes) "" (not (empty $values.otel.resourceAttributes))) | quote }}
{{- end }}
{{- with $values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The store's login and TLS files (scylla.auth, scylla.tls), for every container that
reaches it: variables from the login's Secret, and the paths of the mounted TLS files.
*/}}
{{- define "recap.scyllaSecretEnv" -}}
{{- with .Values.scylla.auth.existingSecret }}
- name: RECAP_SCYLLA_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.scylla.auth.usernameKey }}
- name: RECAP_SCYLLA_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.scylla.auth.passwordKey }}
{{- end }}
{{- with .Values.scylla.tls }}
{{- if .existingSecret }}
- name: RECAP_SCYLLA_TLS_CA
  value: /etc/recap/scylla-tls/ca.pem
{{- if or .certKey .keyKey }}
{{- if not (and .certKey .keyKey) }}
{{- fail "scylla.tls.certKey and scylla.tls.keyKey go together" }}
{{- end }}
- name: RECAP_SCYLLA_TLS_CERT
  value: /etc/recap/scylla-tls/client.pem
- name: RECAP_SCYLLA_TLS_KEY
  value: /etc/recap/scylla-tls/client.key
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The mount of the store's TLS files, when scylla.tls.existingSecret is set. */}}
{{- define "recap.scyllaTlsMount" -}}
{{- if .Values.scylla.tls.existingSecret }}
- name: scylla-tls
  mountPath: /etc/recap/scylla-tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* Its volume: the Secret's keys as the files the variables name. */}}
{{- define "recap.scyllaTlsVolume" -}}
{{- with .Values.scylla.tls }}
{{- if .existingSecret }}
- name: scylla-tls
  secret:
    secretName: {{ .existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ .caKey }}
        path: ca.pem
      {{- if .certKey }}
      - key: {{ .certKey }}
        path: client.pem
      - key: {{ .keyKey }}
        path: client.key
      {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "recap.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext -}}
{{- end -}}

{{- define "recap.containerSecurityContext" -}}
{{- toYaml .Values.containerSecurityContext -}}
{{- end -}}

{{/*
Scheduling: the role's own affinity and spread when given, else a preference for one
replica per node and an even spread over zones and nodes.
Call with (dict "root" $ "role" "query-api" "component" .Values.queryApi).
*/}}
{{- define "recap.scheduling" -}}
{{- $component := .component -}}
{{- with $component.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
affinity:
{{- if $component.affinity }}
  {{- toYaml $component.affinity | nindent 2 }}
{{- else }}
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "recap.selectorLabels" . | nindent 14 }}
{{- end }}
topologySpreadConstraints:
{{- if $component.topologySpreadConstraints }}
  {{- toYaml $component.topologySpreadConstraints | nindent 2 }}
{{- else }}
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "recap.selectorLabels" . | nindent 8 }}
    matchLabelKeys: [pod-template-hash]
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "recap.selectorLabels" . | nindent 8 }}
    matchLabelKeys: [pod-template-hash]
{{- end }}
{{- end -}}

{{/*
One role's Deployment. Call with
(dict "root" $ "role" "query-api" "component" .Values.queryApi "args" (list "query-api") "port" 8080).
port 0: the role serves only the admin listener (the projector).
*/}}
{{- define "recap.deployment" -}}
{{- $root := .root -}}
{{- $values := $root.Values -}}
{{- $component := .component -}}
{{- $ctx := dict "root" $root "role" .role -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "recap.roleName" $ctx }}
  labels:
    {{- include "recap.labels" $ctx | nindent 4 }}
spec:
  {{- if not (and $component.autoscaling $component.autoscaling.enabled) }}
  replicas: {{ $component.replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "recap.selectorLabels" $ctx | nindent 6 }}
  strategy:
    {{- toYaml $component.strategy | nindent 4 }}
  template:
    metadata:
      labels:
        {{- include "recap.selectorLabels" $ctx | nindent 8 }}
        app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
        app.kubernetes.io/part-of: recap
        {{- with $component.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        {{- /* Roll the pods when their settings change: env is read once at start. */}}
        checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
        {{- if $values.metrics.podAnnotations }}
        prometheus.io/scrape: "true"
        prometheus.io/port: "9464"
        prometheus.io/path: /metrics
        {{- end }}
        {{- with $component.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "recap.serviceAccountName" $root }}
      automountServiceAccountToken: false
      enableServiceLinks: false
      {{- with $values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $component.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- /* SIGTERM drains: in-flight requests finish, the projector commits its last batch. */}}
      terminationGracePeriodSeconds: {{ $values.drain.terminationGracePeriodSeconds }}
      securityContext:
        {{- include "recap.podSecurityContext" $root | nindent 8 }}
      {{- include "recap.scheduling" (dict "root" $root "role" .role "component" $component) | trim | nindent 6 }}
      containers:
        - name: {{ .role }}
          image: {{ include "recap.image" $root }}
          imagePullPolicy: {{ $values.image.pullPolicy }}
          args:
            {{- toYaml .args | nindent 12 }}
          envFrom:
            - configMapRef:
                name: {{ include "recap.fullname" $root }}
            {{- with $values.extraEnvFrom }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          env:
            {{- include "recap.env" $ctx | nindent 12 }}
          ports:
            {{- if .port }}
            - name: http
              containerPort: {{ .port }}
              protocol: TCP
            {{- end }}
            - name: admin
              containerPort: 9464
              protocol: TCP
          {{- /* Admin listener: /livez says the process works, /readyz that its store answers. */}}
          startupProbe:
            httpGet:
              path: /livez
              port: admin
            periodSeconds: 5
            timeoutSeconds: 2
            {{- /* The admin listener opens once the store first answers; give it time. */}}
            failureThreshold: {{ $values.probes.startupFailureThreshold }}
          livenessProbe:
            httpGet:
              path: /livez
              port: admin
            periodSeconds: 10
            timeoutSeconds: 2
            failureThreshold: 3
          readinessProbe:
            httpGet:
              path: /readyz
              port: admin
            periodSeconds: 5
            timeoutSeconds: 2
            failureThreshold: 2
          lifecycle:
            preStop:
              {{- /* Endpoints are removed while the pod still serves; then SIGTERM drains. */}}
              sleep:
                seconds: {{ $values.drain.preStopSleepSeconds }}
          resources:
            {{- toYaml $component.resources | nindent 12 }}
          securityContext:
            {{- include "recap.containerSecurityContext" $root | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- with (include "recap.scyllaTlsMount" $root | trim) }}{{ . | nindent 12 }}{{- end }}
      volumes:
        {{- /* The root filesystem is read-only; /tmp is the only writable place. */}}
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
        {{- with (include "recap.scyllaTlsVolume" $root | trim) }}{{ . | nindent 8 }}{{- end }}
{{- end -}}

{{/* A role's PodDisruptionBudget. Same call as recap.deployment. */}}
{{- define "recap.pdb" -}}
{{- $ctx := dict "root" .root "role" .role -}}
{{- if .component.pdb.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "recap.roleName" $ctx }}
  labels:
    {{- include "recap.labels" $ctx | nindent 4 }}
spec:
  {{- if .component.pdb.minAvailable }}
  minAvailable: {{ .component.pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ .component.pdb.maxUnavailable | default 1 }}
  {{- end }}
  {{- /* A pod that never became ready may be evicted even when the budget is spent. */}}
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels:
      {{- include "recap.selectorLabels" $ctx | nindent 6 }}
{{- end }}
{{- end -}}

{{/* A role's Service: the API port (if any) and the admin port for scraping. */}}
{{- define "recap.service" -}}
{{- $ctx := dict "root" .root "role" .role -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "recap.roleName" $ctx }}
  labels:
    {{- include "recap.labels" $ctx | nindent 4 }}
  {{- with .component.service.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ .component.service.type }}
  selector:
    {{- include "recap.selectorLabels" $ctx | nindent 4 }}
  ports:
    {{- if .port }}
    - name: http
      port: {{ .component.service.port }}
      targetPort: http
      protocol: TCP
    {{- end }}
    - name: admin
      port: 9464
      targetPort: admin
      protocol: TCP
{{- end -}}

{{/* A role's HorizontalPodAutoscaler. */}}
{{- define "recap.hpa" -}}
{{- $ctx := dict "root" .root "role" .role -}}
{{- $autoscaling := .component.autoscaling -}}
{{- if $autoscaling.enabled }}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "recap.roleName" $ctx }}
  labels:
    {{- include "recap.labels" $ctx | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "recap.roleName" $ctx }}
  minReplicas: {{ $autoscaling.minReplicas }}
  maxReplicas: {{ $autoscaling.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $autoscaling.targetCPUUtilizationPercentage }}
    {{- with $autoscaling.targetMemoryUtilizationPercentage }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ . }}
    {{- end }}
  {{- with $autoscaling.behavior }}
  behavior:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end -}}
