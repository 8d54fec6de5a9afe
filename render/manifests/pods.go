package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"
)

// Static pod file names (static-pods/<file> → StaticPodDir/<file> on the bootstrap node; the
// kube-proxy pod goes to the masters).
const (
	EtcdPodFile                  = "etcd-bootstrap.yaml"
	KubeAPIServerPodFile         = "kube-apiserver-bootstrap.yaml"
	KubeControllerManagerPodFile = "kube-controller-manager-bootstrap.yaml"
	KubeSchedulerPodFile         = "kube-scheduler-bootstrap.yaml"
	CVOPodFile                   = "cvo-bootstrap.yaml"
	KubeProxyPodFile             = "kube-proxy.yaml"
)

// etcdCipherSuites are the four ECDHE AES-GCM suites OTHW's etcd pod sets (ETCD_CIPHER_SUITES).
const etcdCipherSuites = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"

// checkImage rejects an empty pull spec or one not pinned by digest: every image of a static
// pod comes from the resolved release payload (release/image/<tag>, release/resolve).
func checkImage(what, image string) error {
	if image == "" {
		return fmt.Errorf("%s: empty image pull spec (the release target wrote an empty pullspec)", what)
	}
	if !strings.Contains(image, "@sha256:") {
		return fmt.Errorf("%s: image %q is not a digest pull spec (want repo@sha256:...)", what, image)
	}
	return nil
}

func checkCIDR(field, v string) error {
	p, err := netip.ParsePrefix(v)
	if err != nil || !p.Addr().Is4() || p.Masked() != p {
		return fmt.Errorf("%s: %q is not an IPv4 network in CIDR form (e.g. 10.128.0.0/14)", field, v)
	}
	return nil
}

func checkIP(field, v string) error {
	a, err := netip.ParseAddr(v)
	if err != nil || !a.Is4() {
		return fmt.Errorf("%s: %q is not an IPv4 address", field, v)
	}
	return nil
}

// hostPathVolume is a hostPath volume; t is a core/v1 HostPathType ("DirectoryOrCreate",
// "File") or "" for none.
func hostPathVolume(name, path, t string) volume {
	return volume{Name: name, HostPath: &hostPathSource{Path: path, Type: t}}
}

var (
	secretsVolume     = hostPathVolume("secrets", BootstrapSecretsDir, "")
	kubeconfigsVolume = hostPathVolume("kubeconfigs", KubeconfigsDir, "")
	secretsMount      = volumeMount{Name: "secrets", MountPath: SecretsMountPath, ReadOnly: true}
	kubeconfigsMount  = volumeMount{Name: "kubeconfigs", MountPath: KubeconfigsDir, ReadOnly: true}
)

// requests are a container's memory and CPU requests, as resource.Quantity strings in
// canonical form (what a Quantity parsed from them marshals to: "600Mi", "300m").
func requests(mem, cpu string) resources {
	return resources{Requests: map[string]string{"memory": mem, "cpu": cpu}}
}

func httpsProbe(path string, port, delay, period int32) *probe {
	return &probe{HTTPGet: &httpGetAction{Path: path, Port: port, Scheme: "HTTPS"}, InitialDelaySeconds: delay, PeriodSeconds: period}
}

// execProbe is a probe that runs command, with its delay, period and timeout in seconds.
func execProbe(command []string, delay, period, timeout int32) *probe {
	return &probe{Exec: &execAction{Command: command}, InitialDelaySeconds: delay, PeriodSeconds: period, TimeoutSeconds: timeout}
}

// fieldRefEnv is an environment variable set from the pod's field path (downward API).
func fieldRefEnv(name, fieldPath string) envVar {
	return envVar{Name: name, ValueFrom: &envVarSource{FieldRef: &fieldSelector{FieldPath: fieldPath}}}
}

// staticPod wraps one container in a host-network pod.
func staticPod(name, ns string, labels map[string]string, c container, vols ...volume) *pod {
	c.TerminationMessagePolicy = "FallbackToLogsOnError"
	m := meta(name, ns)
	m.Labels = labels
	return &pod{
		typeMeta: typeMeta{APIVersion: "v1", Kind: "Pod"},
		Metadata: m,
		Spec: podSpec{
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Containers:        []container{c},
			Volumes:           vols,
		},
	}
}

// marshal serializes an object (a local API mirror, types.go) as YAML, keys sorted.
func marshal(o any) ([]byte, error) {
	b, err := yaml.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	return b, nil
}

// EtcdPod renders etcd-bootstrap.yaml: the single-member bootstrap etcd in openshift-etcd,
// mutual TLS on client (2379) and peer (2380) ports with the etcd-signer CA (spec §7.1).
// image is the payload's `etcd` tag by digest; bootstrapIP the bootstrap node's IPv4 address,
// advertised to clients and peers. The liveness probe is etcdctl presenting the server
// certificate as a client (it has clientAuth). It runs privileged, as the installer's
// bootstrap etcd (cluster-etcd-operator release-4.18
// bindata/bootkube/bootstrap-manifests/etcd-member-pod.yaml: privileged: true): it writes the
// hostPath /var/lib/etcd, which container-selinux does not label container_file_t, so with
// SELinux enforcing a container_t etcd cannot (issue 38 #6).
func EtcdPod(image, bootstrapIP string) ([]byte, error) {
	if err := checkImage("etcd pod", image); err != nil {
		return nil, err
	}
	if err := checkIP("etcd pod: bootstrap IP", bootstrapIP); err != nil {
		return nil, err
	}
	priv := true
	c := container{
		Name: "etcd", Image: image,
		Command:         []string{"/usr/bin/etcd"},
		SecurityContext: &securityContext{Privileged: &priv},
		Args: []string{
			"--name=etcd-bootstrap",
			"--data-dir=/var/lib/etcd",
			"--listen-client-urls=https://0.0.0.0:2379",
			"--advertise-client-urls=https://" + bootstrapIP + ":2379",
			"--listen-peer-urls=https://0.0.0.0:2380",
			"--initial-advertise-peer-urls=https://" + bootstrapIP + ":2380",
			"--initial-cluster=etcd-bootstrap=https://" + bootstrapIP + ":2380",
			"--initial-cluster-state=new",
			"--initial-cluster-token=openshift-etcd",
			"--cert-file=" + inPod("etcd-server.crt"),
			"--key-file=" + inPod("etcd-server.key"),
			"--client-cert-auth=true",
			"--trusted-ca-file=" + inPod("etcd-ca.crt"),
			"--peer-cert-file=" + inPod("etcd-peer.crt"),
			"--peer-key-file=" + inPod("etcd-peer.key"),
			"--peer-client-cert-auth=true",
			"--peer-trusted-ca-file=" + inPod("etcd-ca.crt"),
			"--quota-backend-bytes=8589934592",
		},
		Env: []envVar{{Name: "ETCD_CIPHER_SUITES", Value: etcdCipherSuites}},
		Ports: []containerPort{
			{Name: "client", ContainerPort: 2379, Protocol: "TCP"},
			{Name: "peer", ContainerPort: 2380, Protocol: "TCP"},
		},
		LivenessProbe: execProbe([]string{
			"etcdctl", "--cacert=" + inPod("etcd-ca.crt"),
			"--cert=" + inPod("etcd-server.crt"), "--key=" + inPod("etcd-server.key"),
			"--endpoints=https://localhost:2379", "endpoint", "health"}, 45, 30, 10),
		Resources: requests("600Mi", "300m"),
		VolumeMounts: []volumeMount{
			{Name: "data-dir", MountPath: "/var/lib/etcd"},
			secretsMount,
		},
	}
	return marshal(staticPod("etcd-bootstrap", "openshift-etcd", map[string]string{"app": "etcd", "k8s-app": "etcd"}, c,
		hostPathVolume("data-dir", "/var/lib/etcd", "DirectoryOrCreate"), secretsVolume))
}

// KubeAPIServerPod renders kube-apiserver-bootstrap.yaml (spec §7.1) for the payload's
// `hyperkube` image. It serves on 6443 on every address.
//
// Its first flag is --openshift-config=ConfigMountPath/KubeAPIServerConfigFile, as the
// installer's bootstrap pod has it (cluster-kube-apiserver-operator release-4.18
// bindata/bootkube/bootstrap-manifests/kube-apiserver-pod.yaml): OpenShift's kube-apiserver
// then registers and enables its admission plugins (the SCC admission among them) and reads the
// settings KubeAPIServerConfig writes; the service network, the admission plugins and the
// authorization modes are said there, not here (issue 38 #9). The other flags are labbuild's:
// where the installer's bootstrap-config-overrides.yaml carries the same setting in
// apiServerArguments, labbuild keeps it on the command line, once.
//
// Fixed against OTHW: --requestheader-allowed-names lists the front-proxy client's CN
// system:openshift-aggregator together with the kube-apiserver-proxy names openshift's
// operator uses; OTHW's "front-proxy-client" CN would be refused. Kubelets' client and serving
// certificates come from the kubelet signer (the kube-controller-manager's), so the client CA
// is the bundle of the kubernetes CA and the kubelet signer, and the kubelet CA is the kubelet
// signer, as the kube-apiserver-operator's bootstrap-config-overrides.yaml
// (kube-apiserver-complete-client-ca-bundle.crt, kubelet-client-ca-bundle.crt) has them.
func KubeAPIServerPod(image string) ([]byte, error) {
	if err := checkImage("kube-apiserver pod", image); err != nil {
		return nil, err
	}
	c := container{
		Name: "kube-apiserver", Image: image,
		Command: []string{"hyperkube", "kube-apiserver"},
		Args: []string{
			"--openshift-config=" + inConfig(KubeAPIServerConfigFile),
			"--etcd-servers=https://localhost:2379",
			"--etcd-cafile=" + inPod("etcd-ca.crt"),
			"--etcd-certfile=" + inPod("etcd-client.crt"),
			"--etcd-keyfile=" + inPod("etcd-client.key"),
			"--tls-cert-file=" + inPod("kube-apiserver.crt"),
			"--tls-private-key-file=" + inPod("kube-apiserver.key"),
			"--client-ca-file=" + inPod("kube-apiserver-client-ca-bundle.crt"),
			"--service-account-key-file=" + inPod("service-account.pub"),
			"--service-account-signing-key-file=" + inPod("service-account.key"),
			"--service-account-issuer=https://kubernetes.default.svc",
			"--api-audiences=https://kubernetes.default.svc",
			"--requestheader-client-ca-file=" + inPod("front-proxy-ca.crt"),
			"--requestheader-allowed-names=kube-apiserver-proxy,system:kube-apiserver-proxy,system:openshift-aggregator",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-username-headers=X-Remote-User",
			"--proxy-client-cert-file=" + inPod("front-proxy-client.crt"),
			"--proxy-client-key-file=" + inPod("front-proxy-client.key"),
			"--kubelet-client-certificate=" + inPod("kube-apiserver-kubelet-client.crt"),
			"--kubelet-client-key=" + inPod("kube-apiserver-kubelet-client.key"),
			"--kubelet-certificate-authority=" + inPod(KubeletServingCABundle),
			"--enable-bootstrap-token-auth=true",
			"--allow-privileged=true",
			"--v=2",
		},
		Ports:          []containerPort{{Name: "https", ContainerPort: 6443, Protocol: "TCP"}},
		LivenessProbe:  httpsProbe("/healthz", 6443, 45, 10),
		ReadinessProbe: httpsProbe("/readyz", 6443, 10, 10),
		Resources:      requests("1Gi", "500m"),
		VolumeMounts:   []volumeMount{secretsMount, configMount},
	}
	return marshal(staticPod("kube-apiserver", "openshift-kube-apiserver", map[string]string{"app": "openshift-kube-apiserver"}, c, secretsVolume, configVolume))
}

// kubeconfigFlags are the three kubeconfig flags of the controller manager and the scheduler.
func kubeconfigFlags(name string) []string {
	kc := KubeconfigsDir + "/" + name + ".kubeconfig"
	return []string{"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc}
}

var leaderElection = []string{"--leader-elect=true", "--leader-elect-retry-period=3s", "--leader-elect-resource-lock=leases"}

// KubeControllerManagerPod renders kube-controller-manager-bootstrap.yaml (spec §7.1) for the
// `hyperkube` image, the cluster network (CIDR and per-node prefix length) and the service
// network. It signs kubelet CSRs with the kubelet signer (--cluster-signing-*), whose key is
// therefore on the bootstrap node, as cluster-kube-controller-manager-operator
// bindata/bootkube/config/bootstrap-config-overrides.yaml names kubelet-signer.crt/.key.
//
// Fixed against OTHW: --node-cidr-mask-size is the install's hostPrefix (23 by default); OTHW
// leaves the controller's default /24, so node podCIDRs disagree with OVN-Kubernetes' subnets.
// --root-ca-file is the complete server CA bundle (KubeAPIServerServerCABundle), as the
// installer's bootstrap has it, not the kubernetes CA alone: every kube-root-ca.crt and token
// ca.crt carries it, and a pod that loaded only the kubernetes CA cannot trust the masters'
// kube-apiserver after the pivot (issue 38 #2).
//
// Its second container is the cluster-policy-controller (cpcImage, the payload's
// `cluster-policy-controller`), as the installer's bootstrap pod has it
// (cluster-kube-controller-manager-operator release-4.18
// bindata/bootkube/bootstrap-manifests/kube-controller-manager-pod.yaml): `cluster-policy-controller
// start` with --config ClusterPolicyControllerConfigFile, its kubeconfig (the installer's admin
// kubeconfig; labbuild's localhost one), --namespace from the downward API, healthz on 10357. It
// gives namespaces their openshift.io/sa.scc.* annotations before the pivot (issue 38 #9).
func KubeControllerManagerPod(image, cpcImage, clusterNetwork string, hostPrefix int, serviceNetwork string) ([]byte, error) {
	if err := checkImage("kube-controller-manager pod", image); err != nil {
		return nil, err
	}
	if err := checkImage("kube-controller-manager pod: cluster-policy-controller", cpcImage); err != nil {
		return nil, err
	}
	if err := checkCIDR("kube-controller-manager pod: cluster network", clusterNetwork); err != nil {
		return nil, err
	}
	if err := checkCIDR("kube-controller-manager pod: service network", serviceNetwork); err != nil {
		return nil, err
	}
	if bits := netip.MustParsePrefix(clusterNetwork).Bits(); hostPrefix <= bits || hostPrefix > 30 {
		return nil, fmt.Errorf("kube-controller-manager pod: host prefix %d must be longer than the cluster network's /%d and at most 30", hostPrefix, bits)
	}
	args := append(kubeconfigFlags("kube-controller-manager"),
		"--cluster-cidr="+clusterNetwork,
		"--node-cidr-mask-size="+strconv.Itoa(hostPrefix),
		"--service-cluster-ip-range="+serviceNetwork,
		"--allocate-node-cidrs=true",
		"--service-account-private-key-file="+inPod("service-account.key"),
		"--root-ca-file="+inPod(KubeAPIServerServerCABundle),
		"--use-service-account-credentials=true",
		"--cluster-signing-cert-file="+inPod("kubelet-signer.crt"),
		"--cluster-signing-key-file="+inPod("kubelet-signer.key"),
		"--controllers=*,bootstrapsigner,tokencleaner",
	)
	args = append(append(args, leaderElection...), "--v=2")
	c := container{
		Name: "kube-controller-manager", Image: image,
		Command:       []string{"hyperkube", "kube-controller-manager"},
		Args:          args,
		LivenessProbe: httpsProbe("/healthz", 10257, 45, 10),
		Resources:     requests("256Mi", "200m"),
		VolumeMounts:  []volumeMount{secretsMount, kubeconfigsMount},
	}
	p := staticPod("kube-controller-manager", "openshift-kube-controller-manager", map[string]string{"app": "kube-controller-manager"}, c,
		secretsVolume, kubeconfigsVolume, configVolume)
	p.Spec.Containers = append(p.Spec.Containers, clusterPolicyControllerContainer(cpcImage))
	return marshal(p)
}

// ClusterPolicyControllerPort is the cluster-policy-controller's healthz port (servingInfo
// bindAddress 127.0.0.1:10357).
const ClusterPolicyControllerPort = 10357

// clusterPolicyControllerContainer is the bootstrap kube-controller-manager pod's second
// container (KubeControllerManagerPod).
func clusterPolicyControllerContainer(image string) container {
	hz := func(delay int32) *probe {
		p := httpsProbe("healthz", ClusterPolicyControllerPort, delay, 0)
		p.HTTPGet.Host, p.TimeoutSeconds = "localhost", 10
		return p
	}
	return container{
		Name: "cluster-policy-controller", Image: image,
		Command: []string{"cluster-policy-controller", "start"},
		Args: []string{
			"--config=" + inConfig(ClusterPolicyControllerConfigFile),
			"--kubeconfig=" + KubeconfigsDir + "/localhost.kubeconfig",
			"--namespace=$(POD_NAMESPACE)",
			"--v=2",
		},
		Env:                      []envVar{fieldRefEnv("POD_NAME", "metadata.name"), fieldRefEnv("POD_NAMESPACE", "metadata.namespace")},
		Ports:                    []containerPort{{ContainerPort: ClusterPolicyControllerPort}},
		Resources:                requests("200Mi", "10m"),
		VolumeMounts:             []volumeMount{secretsMount, kubeconfigsMount, configMount},
		LivenessProbe:            hz(45),
		ReadinessProbe:           hz(10),
		TerminationMessagePolicy: "FallbackToLogsOnError",
	}
}

// KubeSchedulerPod renders kube-scheduler-bootstrap.yaml (spec §7.1) for the `hyperkube` image.
func KubeSchedulerPod(image string) ([]byte, error) {
	if err := checkImage("kube-scheduler pod", image); err != nil {
		return nil, err
	}
	c := container{
		Name: "kube-scheduler", Image: image,
		Command:       []string{"hyperkube", "kube-scheduler"},
		Args:          append(append(kubeconfigFlags("kube-scheduler"), leaderElection...), "--v=2"),
		LivenessProbe: httpsProbe("/healthz", 10259, 45, 10),
		Resources:     requests("128Mi", "100m"),
		VolumeMounts:  []volumeMount{kubeconfigsMount},
	}
	return marshal(staticPod("kube-scheduler", "openshift-kube-scheduler", map[string]string{"app": "openshift-kube-scheduler"}, c, kubeconfigsVolume))
}

// CVOPodFromPayload renders cvo-bootstrap.yaml, the bootstrap cluster-version operator, from
// the release image's own /bootstrap/bootstrap-pod.yaml (tmpl), executed as the CVO's render
// executes it (cluster-version-operator pkg/payload/render.go manifestRenderConfig: a Go
// text/template over {ReleaseImage, ClusterProfile}), so each release's pod is its own (4.20
// adds readOnlyRootFilesystem, 4.22 the profile annotation its render's Include needs). It runs
// the release image itself (the CVO reads /release-manifests inside its own image), by digest.
// labbuild changes three things, each for its own bootstrap:
//   - the kubeconfig: the localhost kubeconfig in KubeconfigsDir, mounted as the other
//     bootstrap pods mount it (upstream: /etc/kubernetes/kubeconfig, which bootkube.sh copies);
//   - imagePullPolicy IfNotPresent (upstream Always): a pre-pulled or mirrored image runs
//     without a registry round trip (docs/rehearsal.md);
//   - priorityClassName system-node-critical, as labbuild's other bootstrap pods.
//
// The template is decoded strictly: a field labbuild's pod mirror does not know is an error
// naming it, not a silent drop.
func CVOPodFromPayload(tmpl []byte, releaseImage, profile string) ([]byte, error) {
	if err := checkImage("cluster-version-operator pod", releaseImage); err != nil {
		return nil, err
	}
	if profile == "" {
		return nil, errors.New("cluster-version-operator pod: empty cluster profile (set cluster.profile, e.g. self-managed-high-availability)")
	}
	t, err := template.New("bootstrap-pod.yaml").Option("missingkey=error").Parse(string(tmpl))
	if err != nil {
		return nil, fmt.Errorf("cluster-version-operator pod: the payload's /bootstrap/bootstrap-pod.yaml: %w", err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, struct{ ReleaseImage, ClusterProfile string }{releaseImage, profile}); err != nil {
		return nil, fmt.Errorf("cluster-version-operator pod: the payload's /bootstrap/bootstrap-pod.yaml: %w", err)
	}
	var p pod
	if err := yaml.UnmarshalStrict(buf.Bytes(), &p); err != nil {
		return nil, fmt.Errorf("cluster-version-operator pod: the payload's /bootstrap/bootstrap-pod.yaml: %w", err)
	}
	if p.Kind != "Pod" || len(p.Spec.Containers) != 1 {
		return nil, fmt.Errorf("cluster-version-operator pod: the payload's /bootstrap/bootstrap-pod.yaml is kind %q with %d containers, want one Pod container", p.Kind, len(p.Spec.Containers))
	}
	c := &p.Spec.Containers[0]
	c.ImagePullPolicy = "IfNotPresent"
	kc := KubeconfigsDir + "/localhost.kubeconfig"
	found := false
	for i, a := range c.Args {
		if strings.HasPrefix(a, "--kubeconfig=") {
			old := strings.TrimPrefix(a, "--kubeconfig=")
			c.Args[i], found = "--kubeconfig="+kc, true
			for j, m := range c.VolumeMounts {
				if m.MountPath == old {
					c.VolumeMounts[j] = kubeconfigsMount
					for k, v := range p.Spec.Volumes {
						if v.Name == m.Name {
							p.Spec.Volumes[k] = kubeconfigsVolume
						}
					}
				}
			}
		}
	}
	if !found {
		return nil, errors.New("cluster-version-operator pod: the payload's /bootstrap/bootstrap-pod.yaml passes no --kubeconfig")
	}
	p.Spec.PriorityClassName = "system-node-critical"
	return marshal(&p)
}

// KubeProxyHealthzAddress is the masters' kube-proxy's --healthz-bind-address: loopback, off
// kube-proxy's default 0.0.0.0:10256, which ovnkube-node serves on every node once
// OVN-Kubernetes runs (cluster-network-operator release-4.18
// bindata/network/ovn-kubernetes/self-hosted/004-config.yaml healthz-bind-address). With both
// on 10256 ovnkube-node's proxierHealthUpdater cannot listen and warns every 5 s for the life
// of the cluster (issue 38 #8). 10266 lies outside the host ports OpenShift reserves
// (9000-9999, 10250-10259); nothing probes kube-proxy's healthz.
const KubeProxyHealthzAddress = "127.0.0.1:10266"

// KubeProxyPod renders kube-proxy.yaml, the masters' static pod (spec §7.2) that programs the
// `kubernetes` Service ClusterIP until OVN-Kubernetes takes over. image is the payload's
// dedicated `kube-proxy` tag (hyperkube's entrypoint fails there). It is privileged
// (iptables) and authenticates as system:kube-proxy with the kubeconfig at
// KubeProxyKubeconfigPath, a long-lived identity: the kubelet bootstrap kubeconfig OTHW uses
// expires after 24 h, and the network operator never replaces this pod (docs/past-the-pivot.md).
func KubeProxyPod(image, clusterNetwork string) ([]byte, error) {
	if err := checkImage("kube-proxy pod", image); err != nil {
		return nil, err
	}
	if err := checkCIDR("kube-proxy pod: cluster network", clusterNetwork); err != nil {
		return nil, err
	}
	priv := true
	c := container{
		Name: "kube-proxy", Image: image,
		Command: []string{"/usr/bin/kube-proxy"},
		Args: []string{"--kubeconfig=" + KubeProxyKubeconfigPath, "--cluster-cidr=" + clusterNetwork,
			"--healthz-bind-address=" + KubeProxyHealthzAddress, "--v=2"},
		SecurityContext: &securityContext{Privileged: &priv},
		VolumeMounts:    []volumeMount{{Name: "kubeconfig", MountPath: KubeProxyKubeconfigPath, ReadOnly: true}},
	}
	return marshal(staticPod("kube-proxy", "kube-system", map[string]string{"k8s-app": "kube-proxy"}, c,
		hostPathVolume("kubeconfig", KubeProxyKubeconfigPath, "File")))
}

// CRIOPauseConf renders the CRI-O drop-in (CRIOPausePath) that names the payload's `pod`
// image as the pause image, authenticated with the kubelet's pull secret; without it CRI-O
// pulls registry.k8s.io/pause (spec §8.2 #2).
func CRIOPauseConf(podImage string) ([]byte, error) {
	if err := checkImage("CRI-O pause image", podImage); err != nil {
		return nil, err
	}
	return []byte("[crio.image]\npause_image = " + strconv.Quote(podImage) +
		"\npause_image_auth_file = \"/var/lib/kubelet/config.json\"\n"), nil
}
