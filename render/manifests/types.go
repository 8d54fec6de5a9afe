package manifests

// Local mirrors of the Kubernetes and OpenShift API types labbuild renders (issue 18): only the
// fields labbuild writes, with upstream's JSON names and omitempty, so sigs.k8s.io/yaml writes
// the same bytes as it did from k8s.io/api and github.com/openshift/api values. Importing those
// packages ran their initializers (protobuf registration, scheme tables: k8s.io/api/core/v1
// alone ~1.4 ms and 528 allocations) at every labbuild start, `labbuild version` and the null
// build included (docs/api-mirrors.md). TestUpstreamTypes strict-decodes every rendered manifest
// into the upstream type (unknown fields rejected) and re-encodes it the typed way, byte for
// byte; a field added here must exist upstream under the same name.
//
// Where a comment says "mirrors core/v1 X", X is in k8s.io/api core/v1/types.go; rbac/v1 is
// k8s.io/api rbac/v1/types.go, meta/v1 is k8s.io/apimachinery pkg/apis/meta/v1/types.go, and
// config/v1, operator/v1 and image/v1 are github.com/openshift/api's, file named per type.
// sigs.k8s.io/yaml sorts keys, so field order here does not matter.

// typeMeta mirrors k8s.io/apimachinery meta/v1 TypeMeta (apiVersion, kind).
type typeMeta struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

// objectMeta mirrors the fields of k8s.io/apimachinery meta/v1 ObjectMeta that labbuild sets.
// It is the metadata of OpenShift config and operator objects, which newFile writes without
// zero values (no creationTimestamp).
type objectMeta struct {
	Name        string            `json:"name,omitempty"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// kubeMeta is objectMeta as a typed k8s.io/api object writes it: meta/v1 ObjectMeta's
// creationTimestamp is a struct (metav1.Time) that omitempty does not drop, and its zero value
// marshals as null, so every core and RBAC manifest carries `creationTimestamp: null`. It stays,
// so the rendered bytes (and every downstream key) are unchanged.
type kubeMeta struct {
	objectMeta
	CreationTimestamp *struct{} `json:"creationTimestamp"`
}

func meta(name, ns string) kubeMeta {
	return kubeMeta{objectMeta: objectMeta{Name: name, Namespace: ns}}
}

// namespace mirrors core/v1 Namespace; spec and status are empty structs upstream writes as {}.
type namespace struct {
	typeMeta
	Metadata kubeMeta `json:"metadata"`
	Spec     struct{} `json:"spec"`
	Status   struct{} `json:"status"`
}

func newNamespace(name string) *namespace {
	return &namespace{typeMeta: typeMeta{APIVersion: "v1", Kind: "Namespace"}, Metadata: meta(name, "")}
}

// configMap mirrors core/v1 ConfigMap (data only).
type configMap struct {
	typeMeta
	Metadata kubeMeta          `json:"metadata"`
	Data     map[string]string `json:"data,omitempty"`
}

func newConfigMap(ns, name string, data map[string]string) *configMap {
	return &configMap{typeMeta: typeMeta{APIVersion: "v1", Kind: "ConfigMap"}, Metadata: meta(name, ns), Data: data}
}

// Secret types and keys of core/v1 (types.go SecretType constants, TLSCertKey, ...).
const (
	secretTypeOpaque           = "Opaque"
	secretTypeTLS              = "kubernetes.io/tls"
	secretTypeDockerConfigJSON = "kubernetes.io/dockerconfigjson"
	tlsCertKey                 = "tls.crt"
	tlsPrivateKeyKey           = "tls.key"
	dockerConfigJSONKey        = ".dockerconfigjson"
)

// secretObject mirrors core/v1 Secret (data, base64 as []byte marshals, and type).
type secretObject struct {
	typeMeta
	Metadata   kubeMeta          `json:"metadata"`
	Data       map[string][]byte `json:"data,omitempty"`
	StringData map[string]string `json:"stringData,omitempty"`
	Type       string            `json:"type,omitempty"`
}

func newSecret(ns, name, typ string, data map[string][]byte) *secretObject {
	return &secretObject{typeMeta: typeMeta{APIVersion: "v1", Kind: "Secret"}, Metadata: meta(name, ns), Type: typ, Data: data}
}

// clusterRoleBinding mirrors rbac/v1 ClusterRoleBinding.
type clusterRoleBinding struct {
	typeMeta
	Metadata kubeMeta  `json:"metadata"`
	Subjects []subject `json:"subjects,omitempty"`
	RoleRef  roleRef   `json:"roleRef"`
}

// clusterRole mirrors rbac/v1 ClusterRole (rules only).
type clusterRole struct {
	typeMeta
	Metadata kubeMeta     `json:"metadata"`
	Rules    []policyRule `json:"rules"`
}

// policyRule mirrors rbac/v1 PolicyRule (the fields labbuild sets).
type policyRule struct {
	Verbs     []string `json:"verbs"`
	APIGroups []string `json:"apiGroups,omitempty"`
	Resources []string `json:"resources,omitempty"`
}

// subject mirrors rbac/v1 Subject.
type subject struct {
	Kind     string `json:"kind"`
	APIGroup string `json:"apiGroup,omitempty"`
	Name     string `json:"name"`
}

// roleRef mirrors rbac/v1 RoleRef.
type roleRef struct {
	APIGroup string `json:"apiGroup"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
}

// pod mirrors core/v1 Pod as a static pod manifest: status is the empty PodStatus ({}).
type pod struct {
	typeMeta
	Metadata kubeMeta `json:"metadata"`
	Spec     podSpec  `json:"spec"`
	Status   struct{} `json:"status"`
}

// podSpec mirrors the core/v1 PodSpec fields of the bootstrap static pods.
type podSpec struct {
	Volumes                       []volume    `json:"volumes,omitempty"`
	Containers                    []container `json:"containers"`
	TerminationGracePeriodSeconds *int64      `json:"terminationGracePeriodSeconds,omitempty"`
	DNSPolicy                     string      `json:"dnsPolicy,omitempty"`
	HostNetwork                   bool        `json:"hostNetwork,omitempty"`
	PriorityClassName             string      `json:"priorityClassName,omitempty"`
}

// volume mirrors core/v1 Volume with its only source here, hostPath (HostPathVolumeSource;
// type is one of core/v1's HostPathType values, "" for none).
type volume struct {
	Name     string          `json:"name"`
	HostPath *hostPathSource `json:"hostPath,omitempty"`
}

// hostPathSource mirrors core/v1 HostPathVolumeSource.
type hostPathSource struct {
	Path string `json:"path"`
	Type string `json:"type,omitempty"`
}

// container mirrors core/v1 Container. resources is a struct upstream (ResourceRequirements),
// written as {} when empty.
type container struct {
	Name                     string           `json:"name"`
	Image                    string           `json:"image,omitempty"`
	Command                  []string         `json:"command,omitempty"`
	Args                     []string         `json:"args,omitempty"`
	Ports                    []containerPort  `json:"ports,omitempty"`
	Env                      []envVar         `json:"env,omitempty"`
	Resources                resources        `json:"resources"`
	VolumeMounts             []volumeMount    `json:"volumeMounts,omitempty"`
	LivenessProbe            *probe           `json:"livenessProbe,omitempty"`
	ReadinessProbe           *probe           `json:"readinessProbe,omitempty"`
	TerminationMessagePolicy string           `json:"terminationMessagePolicy,omitempty"`
	ImagePullPolicy          string           `json:"imagePullPolicy,omitempty"`
	SecurityContext          *securityContext `json:"securityContext,omitempty"`
}

// resources mirrors core/v1 ResourceRequirements; quantities are resource.Quantity's canonical
// strings ("600Mi", "300m"), which is how a Quantity marshals.
type resources struct {
	Requests map[string]string `json:"requests,omitempty"`
}

// containerPort mirrors core/v1 ContainerPort.
type containerPort struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
}

// envVar mirrors core/v1 EnvVar with a downward-API fieldRef (EnvVarSource.FieldRef,
// ObjectFieldSelector).
type envVar struct {
	Name      string        `json:"name"`
	Value     string        `json:"value,omitempty"`
	ValueFrom *envVarSource `json:"valueFrom,omitempty"`
}

// envVarSource mirrors core/v1 EnvVarSource (fieldRef only).
type envVarSource struct {
	FieldRef *fieldSelector `json:"fieldRef,omitempty"`
}

// fieldSelector mirrors core/v1 ObjectFieldSelector.
type fieldSelector struct {
	FieldPath string `json:"fieldPath"`
}

// volumeMount mirrors core/v1 VolumeMount.
type volumeMount struct {
	Name      string `json:"name"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
	MountPath string `json:"mountPath"`
}

// probe mirrors core/v1 Probe with its inlined ProbeHandler (exec or httpGet). httpGet's port
// is an intstr.IntOrString holding an int, which marshals as a number.
type probe struct {
	Exec                *execAction    `json:"exec,omitempty"`
	HTTPGet             *httpGetAction `json:"httpGet,omitempty"`
	InitialDelaySeconds int32          `json:"initialDelaySeconds,omitempty"`
	TimeoutSeconds      int32          `json:"timeoutSeconds,omitempty"`
	PeriodSeconds       int32          `json:"periodSeconds,omitempty"`
}

// execAction mirrors core/v1 ExecAction.
type execAction struct {
	Command []string `json:"command,omitempty"`
}

// httpGetAction mirrors core/v1 HTTPGetAction.
type httpGetAction struct {
	Path   string `json:"path,omitempty"`
	Port   int32  `json:"port"`
	Scheme string `json:"scheme,omitempty"`
}

// securityContext mirrors core/v1 SecurityContext (privileged only).
type securityContext struct {
	Privileged             *bool `json:"privileged,omitempty"`
	ReadOnlyRootFilesystem *bool `json:"readOnlyRootFilesystem,omitempty"`
}

// The OpenShift objects below are written without zero values (newFile), so their mirrors use
// omitempty wherever the value can be zero, except where upstream's JSON name has no omitempty
// and labbuild writes a meaningful zero (Scheduler mastersSchedulable: false, operator Network
// disableNetworkDiagnostics: false).

// configTypeMeta is the TypeMeta of config.openshift.io/v1 kind.
func configTypeMeta(kind string) typeMeta {
	return typeMeta{APIVersion: "config.openshift.io/v1", Kind: kind}
}

// TopologyMode values of config.openshift.io/v1 (openshift/api config/v1/types_infrastructure.go
// TopologyMode).
const (
	HighlyAvailableTopologyMode = "HighlyAvailable"
	SingleReplicaTopologyMode   = "SingleReplica"
)

// Platform types and the baremetal load balancer type of config.openshift.io/v1
// (types_infrastructure.go PlatformType, PlatformLoadBalancerType).
const (
	nonePlatformType                        = "None"
	bareMetalPlatformType                   = "BareMetal"
	loadBalancerTypeOpenShiftManagedDefault = "OpenShiftManagedDefault"
)

// infrastructure mirrors config.openshift.io/v1 Infrastructure (openshift/api
// config/v1/types_infrastructure.go): spec.platformSpec and the status fields
// openshift-install writes.
type infrastructure struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		PlatformSpec platformSpec `json:"platformSpec"`
	} `json:"spec"`
	Status infrastructureStatus `json:"status"`
}

// platformSpec mirrors config/v1 PlatformSpec (type and baremetal).
type platformSpec struct {
	Type      string         `json:"type,omitempty"`
	BareMetal *baremetalSpec `json:"baremetal,omitempty"`
}

// baremetalSpec mirrors config/v1 BareMetalPlatformSpec (IP and CIDR are strings upstream).
type baremetalSpec struct {
	APIServerInternalIPs []string `json:"apiServerInternalIPs,omitempty"`
	IngressIPs           []string `json:"ingressIPs,omitempty"`
	MachineNetworks      []string `json:"machineNetworks,omitempty"`
}

// infrastructureStatus mirrors config/v1 InfrastructureStatus. The internal API URL's JSON
// name is apiServerInternalURI upstream.
type infrastructureStatus struct {
	InfrastructureName     string          `json:"infrastructureName,omitempty"`
	Platform               string          `json:"platform,omitempty"`
	PlatformStatus         *platformStatus `json:"platformStatus,omitempty"`
	APIServerURL           string          `json:"apiServerURL,omitempty"`
	APIServerInternalURL   string          `json:"apiServerInternalURI,omitempty"`
	ControlPlaneTopology   string          `json:"controlPlaneTopology,omitempty"`
	InfrastructureTopology string          `json:"infrastructureTopology,omitempty"`
	CPUPartitioning        string          `json:"cpuPartitioning,omitempty"`
}

// platformStatus mirrors config/v1 PlatformStatus (type and baremetal).
type platformStatus struct {
	Type      string           `json:"type,omitempty"`
	BareMetal *baremetalStatus `json:"baremetal,omitempty"`
}

// baremetalStatus mirrors config/v1 BareMetalPlatformStatus.
type baremetalStatus struct {
	APIServerInternalIP  string        `json:"apiServerInternalIP,omitempty"`
	APIServerInternalIPs []string      `json:"apiServerInternalIPs,omitempty"`
	IngressIP            string        `json:"ingressIP,omitempty"`
	IngressIPs           []string      `json:"ingressIPs,omitempty"`
	MachineNetworks      []string      `json:"machineNetworks,omitempty"`
	LoadBalancer         *loadBalancer `json:"loadBalancer,omitempty"`
}

// loadBalancer mirrors config/v1 BareMetalPlatformLoadBalancer.
type loadBalancer struct {
	Type string `json:"type,omitempty"`
}

// clusterNetworkEntry mirrors config/v1 and operator/v1 ClusterNetworkEntry.
type clusterNetworkEntry struct {
	CIDR       string `json:"cidr,omitempty"`
	HostPrefix uint32 `json:"hostPrefix,omitempty"`
}

// networkConfig mirrors config.openshift.io/v1 Network (config/v1/types_network.go NetworkSpec).
type networkConfig struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		ClusterNetwork []clusterNetworkEntry `json:"clusterNetwork,omitempty"`
		ServiceNetwork []string              `json:"serviceNetwork,omitempty"`
		NetworkType    string                `json:"networkType,omitempty"`
	} `json:"spec"`
}

// operatorNetwork mirrors operator.openshift.io/v1 Network (operator/v1/types_network.go
// NetworkSpec with its inlined OperatorSpec's managementState). disableNetworkDiagnostics has
// no omitempty upstream, so false is written.
type operatorNetwork struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		ManagementState string                `json:"managementState,omitempty"`
		ClusterNetwork  []clusterNetworkEntry `json:"clusterNetwork,omitempty"`
		ServiceNetwork  []string              `json:"serviceNetwork,omitempty"`
		DefaultNetwork  struct {
			Type string `json:"type,omitempty"`
		} `json:"defaultNetwork"`
		DisableNetworkDiagnostics bool `json:"disableNetworkDiagnostics"`
	} `json:"spec"`
}

// configObject is a config.openshift.io/v1 singleton with a small spec S: DNS (dnsSpec),
// Ingress (ingressSpec), Proxy (struct{}: labbuild sets no proxy), Scheduler (schedulerSpec),
// ClusterVersion (clusterVersionSpec). Every config CRD requires spec, so an empty one is
// written as {}.
type configObject[S any] struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     S          `json:"spec"`
}

func newConfig[S any](kind, name string, spec S) *configObject[S] {
	return &configObject[S]{typeMeta: configTypeMeta(kind), Metadata: objectMeta{Name: name}, Spec: spec}
}

// dnsSpec mirrors config/v1 DNSSpec (types_dns.go).
type dnsSpec struct {
	BaseDomain string `json:"baseDomain,omitempty"`
}

// ingressSpec mirrors config/v1 IngressSpec (types_ingress.go).
type ingressSpec struct {
	Domain string `json:"domain,omitempty"`
}

// schedulerSpec mirrors config/v1 SchedulerSpec (types_scheduler.go); mastersSchedulable has
// no omitempty upstream.
type schedulerSpec struct {
	MastersSchedulable bool `json:"mastersSchedulable"`
}

// clusterVersionSpec mirrors config/v1 ClusterVersionSpec (types_cluster_version.go).
type clusterVersionSpec struct {
	ClusterID string `json:"clusterID,omitempty"`
	Channel   string `json:"channel,omitempty"`
	Upstream  string `json:"upstream,omitempty"`
}

// featureGate mirrors config.openshift.io/v1 FeatureGate (types_feature.go): spec.featureSet
// ("" is Default) and status.featureGates (FeatureGateDetails; enabled and disabled have no
// omitempty upstream, so an empty list is written as []).
type featureGate struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		FeatureSet string `json:"featureSet,omitempty"`
	} `json:"spec"`
	Status struct {
		FeatureGates []featureGateDetails `json:"featureGates"`
	} `json:"status"`
}

// featureGateDetails mirrors config/v1 FeatureGateDetails; each gate is a
// FeatureGateAttributes {name}.
type featureGateDetails struct {
	Version  string          `json:"version,omitempty"`
	Enabled  []featureGateAt `json:"enabled"`
	Disabled []featureGateAt `json:"disabled"`
}

// featureGateAt mirrors config/v1 FeatureGateAttributes.
type featureGateAt struct {
	Name string `json:"name"`
}

// ImageStream mirrors image.openshift.io/v1 ImageStream (openshift/api image/v1/types.go) as a
// release payload's /release-manifests/image-references holds it (oc adm release new): kind,
// metadata.name (the release version) and spec.tags. labbuild only reads it; it is here, with
// the other API mirrors, so the release targets and render/mco need not link openshift/api's
// image/v1 (and through it core/v1) at start-up.
type ImageStream struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Tags []ImageTag `json:"tags"`
	} `json:"spec"`
}

// ImageTag mirrors image/v1 TagReference: a payload tag (Name) and, in From (a core/v1
// ObjectReference), the image it points at: Kind "DockerImage" and Name a pull spec.
type ImageTag struct {
	Name string `json:"name"`
	From *struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"from"`
}
