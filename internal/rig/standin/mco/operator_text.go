package main

// The operator bootstrap's own manifests, as the real MCO renders them (pkg/operator/bootstrap.go
// RenderBootstrap renders manifests/<name> with pkg/operator/render.go renderAsset). The text
// below is the stand-in's own form of MCO manifests/bootstrap-pod-v2.yaml,
// {master,worker}.machineconfigpool.yaml, machineconfigcontroller/controllerconfig.yaml,
// machineconfigserver/csr-bootstrap-role-binding.yaml and
// machineconfigserver/kube-apiserver-serving-ca-configmap.yaml, which are the same text at
// release-4.18, 4.20 and 4.22; TestMatchesRealMCO requires every rendered file byte for byte
// against what the real programs wrote (../shared/fixtures/mco-real). The texts keep the real
// files' quirks: flow-style command lists, quoted arguments, a different indentation of the
// server's args, no newline at the end of the pools and the role binding.

// operatorTextData is what those manifests read (pkg/operator/render.go renderConfig):
// TargetNamespace is empty at bootstrap (getRenderConfig("", ...)), Image the operator image,
// ReleaseVersion --payload-version, Version version.Raw, ControllerConfigYAML the indented
// toYAML of the ControllerConfig spec, ServingCA --kube-ca indented.
type operatorTextData struct {
	TargetNamespace, Image, ReleaseVersion, Version, ControllerConfigYAML, ServingCA string
}

const bootstrapPodText = `apiVersion: v1
kind: Pod
metadata:
  name: bootstrap-machine-config-operator
  namespace: {{.TargetNamespace}}
  annotations:
    target.workload.openshift.io/management: '{"effect": "PreferredDuringScheduling"}'
spec:
  initContainers:
  - name: machine-config-controller
    image: {{.Image}}
    command: ["/usr/bin/machine-config-controller"]
    args:
    - "bootstrap"
    - "--manifest-dir=/etc/mcc/bootstrap"
    - "--dest-dir=/etc/mcs/bootstrap"
    - "--pull-secret=/etc/mcc/bootstrap/machineconfigcontroller-pull-secret"
    - "--payload-version={{.ReleaseVersion}}"
    resources:
      requests:
        cpu: 20m
        memory: 200Mi
    securityContext:
      privileged: true
      readOnlyRootFilesystem: false
    terminationMessagePolicy: FallbackToLogsOnError
    volumeMounts:
    - name: bootstrap-manifests
      mountPath: /etc/mcc/bootstrap
      mountPropagation: HostToContainer
    - name: server-basedir
      mountPath: /etc/mcs/bootstrap
      mountPropagation: HostToContainer
  containers:
  - name: machine-config-server
    image: {{.Image}}
    command: ["/usr/bin/machine-config-server"]
    args:
      - "bootstrap"
      - "--payload-version={{.ReleaseVersion}}"
    terminationMessagePolicy: FallbackToLogsOnError
    volumeMounts:
    - name: server-certs
      mountPath: /etc/ssl/mcs
      mountPropagation: HostToContainer
    - name: bootstrap-kubeconfig
      mountPath: /etc/kubernetes/kubeconfig
      mountPropagation: HostToContainer
    - name: server-basedir
      mountPath: /etc/mcs/bootstrap
      mountPropagation: HostToContainer
    securityContext:
      privileged: true
      readOnlyRootFilesystem: false
  hostNetwork: true
  tolerations:
    - key: node-role.kubernetes.io/master
      operator: Exists
      effect: NoSchedule
  restartPolicy: Always
  volumes:
  - name: server-certs
    hostPath:
      path: /etc/ssl/mcs
  - name: bootstrap-kubeconfig
    hostPath:
      path: /etc/mcs/kubeconfig
  - name: server-basedir
    hostPath:
      path: /etc/mcs/bootstrap
  - name: bootstrap-manifests
    hostPath:
      path: /etc/mcc/bootstrap
`

const masterPoolText = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: master
  labels:
    "operator.machineconfiguration.openshift.io/required-for-upgrade": ""
    "machineconfiguration.openshift.io/mco-built-in": ""
    "pools.operator.machineconfiguration.openshift.io/master": ""
spec:
  machineConfigSelector:
    matchLabels:
      "machineconfiguration.openshift.io/role": "master"
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/master: ""`

const workerPoolText = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
  labels:
    "machineconfiguration.openshift.io/mco-built-in": ""
    "pools.operator.machineconfiguration.openshift.io/worker": ""
spec:
  machineConfigSelector:
    matchLabels:
      "machineconfiguration.openshift.io/role": "worker"
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/worker: ""`

const controllerConfigText = `apiVersion: machineconfiguration.openshift.io/v1
kind: ControllerConfig
metadata:
  name: machine-config-controller
  annotations:
    machineconfiguration.openshift.io/generated-by-version: "{{ .Version }}"
spec:
{{.ControllerConfigYAML}}
`

const csrRoleBindingText = "# system-bootstrap-node-bootstrapper lets serviceaccount `openshift-machine-config-operator/node-bootstrapper` tokens and nodes request CSRs." + `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system-bootstrap-node-bootstrapper
subjects:
- kind: ServiceAccount
  name: node-bootstrapper
  namespace: openshift-machine-config-operator
roleRef:
  kind: ClusterRole
  name: system:node-bootstrapper
  apiGroup: rbac.authorization.k8s.io`

const servingCAConfigMapText = `apiVersion: v1
kind: ConfigMap
metadata:
  name: initial-kube-apiserver-server-ca
  namespace: openshift-config
  annotations:
    openshift.io/owning-component: Machine Config Operator
data:
  ca-bundle.crt: |
{{.ServingCA}}
`
