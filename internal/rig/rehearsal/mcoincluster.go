package rehearsal

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/labbuild/labbuild/render/releases"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/render/mco"
	"github.com/labbuild/labbuild/targets/kube"
)

// The machine-config-operator's in-cluster part, as a STAND-IN (issue 38, stall 7): what
// creates rendered-<pool>-<hash> in the cluster, which the machine-config daemon needs on its
// first boot (MCO release-4.18 pkg/daemon/daemon.go getStateAndConfigs → mcLister.Get of the
// node's currentConfig; pkg/operator/sync.go syncRenderConfig says why the name must be the
// bootstrap's: "if the MCO cannot find an existing machineconfig, the operator and machines
// perma-wedge"). Nothing else in the rehearsal puts a MachineConfig of the render into the
// cluster: labbuild applies only 99-<pool>-ssh; the bootstrap's render stays on the bootstrap.
//
// In a real cluster the operator (pkg/operator/sync.go syncRenderConfig) builds the
// ControllerConfig from cluster objects, and the controller's template, container-runtime-config
// and render controllers turn it, the pull secret, the mirror sets and the cluster's
// MachineConfigs into rendered-<pool>-<hash>. The bootstrap path (`machine-config-operator
// bootstrap`, `machine-config-controller bootstrap`) calls the same functions with the same
// inputs read from files (pkg/operator/bootstrap.go RenderBootstrap → createDiscoveredControllerConfigSpec;
// pkg/controller/bootstrap Bootstrap.Run → template, kubelet-config, container-runtime-config
// and render RunBootstrap). So the stand-in reads, from the cluster, exactly the objects
// syncRenderConfig reads during bring-up (the branch before kube-system/bootstrap, "frozen in
// time" to match the installer's render), writes each as the file its bootstrap flag names, and
// runs the release's own two programs (labbuild's release/mco: the payload's MCO image) on
// them. The rendered MachineConfigs and the pools with their status.configuration go into the
// cluster, as the render controller writes them.
//
// Reads (syncRenderConfig and getGlobalConfig, release-4.18 pkg/operator/sync.go):
//
//	ConfigMap openshift-machine-config-operator/machine-config-operator-images images.json   --image-references (the operands' images), --payload-version (releaseVersion)
//	ConfigMap openshift-machine-config-operator/machine-config-osimageurl                    baseOSContainerImage, baseOSExtensionsContainerImage (getOsImageURLs)
//	ConfigMap kube-system/root-ca ca.crt                                                      --root-ca
//	ConfigMap openshift-config/initial-kube-apiserver-server-ca ca-bundle.crt (+ openshift-kube-apiserver-operator/kube-apiserver-to-kubelet-client-ca when present)  --kube-ca
//	Infrastructure, Network, Proxy, DNS cluster (config.openshift.io/v1)                      --infra/network/proxy/dns-config-file
//	ConfigMap openshift-config/user-ca-bundle (when present)                                  --additional-trust-bundle-config-file
//	Secret openshift-config/pull-secret                                                       --pull-secret (ControllerConfig spec.pullSecret names it)
//	ConfigMap kube-system/cluster-config-v1                                                   --config-file (the operator's bootstrap needs it; in the cluster the same values come from the objects above)
//	FeatureGate cluster; MachineConfigs (not rendered-*); ImageDigestMirrorSets, ImageTagMirrorSets  the controller's --manifest-dir
//
// Differences, by design: the md5 salt and template rendering are the MCO stand-in's
// (internal/rig/standin/mco, as at the bootstrap: names match iff the inputs do); the
// ControllerConfig is not written to the cluster (nothing in the rehearsal reads it).

// MCONamespace is the machine-config-operator's namespace.
const MCONamespace = "openshift-machine-config-operator"

// mcoReader names the upstream code the in-cluster stand-in follows, for MissingObjectError.
const mcoReader = "machine-config-operator (machine-config-operator release-4.18) pkg/operator/sync.go syncRenderConfig"

var (
	machineConfigs     = kube.GroupVersionResource{Group: "machineconfiguration.openshift.io", Version: "v1", Resource: "machineconfigs"}
	machineConfigPools = kube.GroupVersionResource{Group: "machineconfiguration.openshift.io", Version: "v1", Resource: "machineconfigpools"}
	configGVR          = func(res string) kube.GroupVersionResource {
		return kube.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: res}
	}
)

// MCOImagesConfigMaps are the machine-config-operator's two payload ConfigMaps as the CVO
// applies them (release-4.18 install/0000_80_machine-config_02_images.configmap.yaml and
// 0000_80_machine-config_05_osimageurl.yaml, their placeholders replaced by the release's pull
// specs from image-references, as `oc adm release new` does): pullspec maps a payload tag to
// its pull spec. rel is the payload's release row: from 4.22 images.json also names
// dockerRegistryImage (MCO release-4.22 install/0000_80_machine-config_02_images.configmap.yaml,
// the docker-registry tag its bootstrap requires), and the osimageurl ConfigMap names
// rel.BaseOSTag and its "-extensions" tag ("stream-coreos" in OKD, whose MCO image has its
// install/ rewritten so: ../shared/fixtures/versions/okd-4.22/NOTES.md). The rehearsal's CVO
// stand-in applies them.
func MCOImagesConfigMaps(version string, rel releases.Release, pullspec func(tag string) string) (map[string][]byte, error) {
	images := map[string]string{
		"releaseVersion":           version,
		"machineConfigOperator":    pullspec("machine-config-operator"),
		"infraImage":               pullspec("pod"),
		"keepalivedImage":          pullspec("keepalived-ipfailover"),
		"corednsImage":             pullspec("coredns"),
		"haproxyImage":             pullspec("haproxy-router"),
		"baremetalRuntimeCfgImage": pullspec("baremetal-runtimecfg"),
		"oauthProxy":               pullspec("oauth-proxy"),
		"kubeRbacProxy":            pullspec("kube-rbac-proxy"),
	}
	if slices.Contains(rel.MCORequiredTags, "docker-registry") {
		images["dockerRegistryImage"] = pullspec("docker-registry")
	}
	ij, err := json.MarshalIndent(images, "", "  ")
	if err != nil {
		return nil, err
	}
	cm := func(name string, data map[string]string) ([]byte, error) {
		return json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": MCONamespace}, "data": data})
	}
	a, err := cm("machine-config-operator-images", map[string]string{"images.json": string(ij) + "\n"})
	if err != nil {
		return nil, err
	}
	b, err := cm("machine-config-osimageurl", map[string]string{"releaseVersion": version,
		"baseOSContainerImage": pullspec(rel.BaseOSTag), "baseOSExtensionsContainerImage": pullspec(rel.BaseOSTag + "-extensions"), "osImageURL": ""})
	if err != nil {
		return nil, err
	}
	return map[string][]byte{"0000_80_machine-config_02_images.configmap.yaml": a, "0000_80_machine-config_05_osimageurl.yaml": b}, nil
}

// MCOInCluster is the in-cluster stand-in's configuration: the release's machine-config-operator
// and machine-config-controller programs and templates tree (labbuild's release/mco), and a work
// directory of its own. Release is the payload's release row (the zero row is 4.18): the
// tags its image-references carries and whether its controller reads image-references too.
type MCOInCluster struct {
	Operator, Controller, Templates string
	Work                            string
	Release                         releases.Release
}

// MCORendered is what one render put into the cluster: each pool's rendered MachineConfig name.
type MCORendered map[string]string

// Render reads the cluster objects (see above), renders, and creates the rendered
// MachineConfigs and the pools in the cluster (an existing one is kept: the name is a hash of
// the content). It returns the pools' rendered names; a missing input is a *MissingObjectError.
func (m *MCOInCluster) Render(ctx context.Context, dyn kube.Interface) (MCORendered, error) {
	work := filepath.Join(m.Work, "inputs")
	os.RemoveAll(m.Work)
	if err := os.MkdirAll(filepath.Join(work, "tls"), 0o700); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(work, "manifests"), 0o700); err != nil {
		return nil, err
	}
	write := func(rel string, b []byte) error {
		return os.WriteFile(filepath.Join(work, filepath.FromSlash(rel)), b, 0o600)
	}
	object := func(gvr kube.GroupVersionResource, ns, name string) ([]byte, error) {
		var (
			o   *kube.Unstructured
			err error
		)
		if ns == "" {
			o, err = dyn.Resource(gvr).Get(ctx, name, kube.GetOptions{})
		} else {
			o, err = dyn.Resource(gvr).Namespace(ns).Get(ctx, name, kube.GetOptions{})
		}
		if err != nil {
			what := strings.TrimSuffix(gvr.Resource, "s") + " " + strings.TrimPrefix(ns+"/"+name, "/")
			return nil, &MissingObjectError{Object: what, Operator: mcoReader, Err: err}
		}
		return json.Marshal(o.Object)
	}

	// The operands' images and the release version (syncRenderConfig: images.json; getOsImageURLs).
	imgs, err := objectData(ctx, dyn, configMaps, MCONamespace, "machine-config-operator-images", mcoReader, "images.json")
	if err != nil {
		return nil, err
	}
	osurl, err := objectData(ctx, dyn, configMaps, MCONamespace, "machine-config-osimageurl", mcoReader+" getOsImageURLs", "baseOSContainerImage")
	if err != nil {
		return nil, err
	}
	var images map[string]string
	if err := json.Unmarshal(imgs["images.json"], &images); err != nil {
		return nil, fmt.Errorf("rehearsal: MCO stand-in: images.json: %w", err)
	}
	rel := m.Release
	if rel.Name == "" {
		rel, _ = releases.Named("4.18")
	}
	refs, err := mcoImageReferences(images, osurl, rel)
	if err != nil {
		return nil, err
	}
	if err := write(mco.ImageReferencesFile, refs); err != nil {
		return nil, err
	}
	version := images["releaseVersion"]

	// The CAs, during bring-up (before kube-system/bootstrap: the render "frozen in time").
	// ControllerConfig rootCAData: kube-system/root-ca at 4.18, the machine-config-server CA
	// bundle from 4.19 (MCSCABundle).
	var rootCA []byte
	if rel.MCSCA {
		if rootCA, _, err = MCSCABundle(ctx, dyn); err != nil {
			return nil, err
		}
	} else {
		root, err := objectData(ctx, dyn, configMaps, "kube-system", "root-ca", mcoReader, "ca.crt")
		if err != nil {
			return nil, err
		}
		rootCA = root["ca.crt"]
	}
	if err := write(mco.RootCAFile, rootCA); err != nil {
		return nil, err
	}
	kca, err := objectData(ctx, dyn, configMaps, "openshift-config", "initial-kube-apiserver-server-ca", mcoReader, "ca-bundle.crt")
	if err != nil {
		return nil, err
	}
	kubeCA := kca["ca-bundle.crt"]
	if kc, err := objectData(ctx, dyn, configMaps, "openshift-kube-apiserver-operator", "kube-apiserver-to-kubelet-client-ca", mcoReader, "ca-bundle.crt"); err == nil {
		// mergeCertWithCABundle: the kubelet-client CA joins the initial bundle.
		kubeCA = append(append(bytes.TrimSpace(kubeCA), '\n'), kc["ca-bundle.crt"]...)
	}
	if err := write(mco.KubeCAFile, kubeCA); err != nil {
		return nil, err
	}

	// getGlobalConfig's objects, the install-config, the pull secret, the trust bundle.
	for _, o := range []struct {
		gvr      kube.GroupVersionResource
		ns, name string
		file     string
	}{
		{configGVR("infrastructures"), "", "cluster", mco.InfrastructureFile},
		{configGVR("networks"), "", "cluster", mco.NetworkFile},
		{configGVR("proxies"), "", "cluster", mco.ProxyFile},
		{configGVR("dnses"), "", "cluster", mco.DNSFile},
		{configMaps, "kube-system", "cluster-config-v1", mco.ClusterConfigFile},
		{secrets, "openshift-config", "pull-secret", mco.PullSecretFile},
		{configGVR("featuregates"), "", "cluster", mco.FeatureGateFile},
	} {
		b, err := object(o.gvr, o.ns, o.name)
		if err != nil {
			return nil, err
		}
		if err := write(o.file, b); err != nil {
			return nil, err
		}
	}
	if b, err := object(configMaps, "openshift-config", "user-ca-bundle"); err == nil {
		if err := write(mco.UserCABundleFile, b); err != nil {
			return nil, err
		}
	} else if !kube.IsNotFound(errors.Unwrap(err)) {
		return nil, err
	}

	// machine-config-operator bootstrap: the ControllerConfig and the pools.
	dest := filepath.Join(m.Work, "mco-bootstrap")
	if out, err := exec.CommandContext(ctx, m.Operator, mco.OperatorArgs(work, dest, "", version)...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("rehearsal: MCO stand-in: machine-config-operator bootstrap: %w\n%s", err, mco.Tail(out, 15))
	}
	mdir := filepath.Join(m.Work, "mcc-bootstrap")
	if err := os.MkdirAll(mdir, 0o700); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(filepath.Join(dest, filepath.FromSlash(mco.OperatorManifestDir)))
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(mco.OperatorManifestDir), e.Name()))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(mdir, e.Name()), b, 0o600); err != nil {
			return nil, err
		}
	}
	// The controller's informers: the FeatureGate, the cluster's MachineConfigs (those nothing
	// of the controller generated) and the mirror sets.
	fg, _ := os.ReadFile(filepath.Join(work, filepath.FromSlash(mco.FeatureGateFile)))
	if err := os.WriteFile(filepath.Join(mdir, "featuregate.yaml"), fg, 0o600); err != nil {
		return nil, err
	}
	// From 4.22 the controller decodes image-references from its --manifest-dir too, as
	// labbuild's bootstrap render gives it (render/releases MCCImageReferences).
	if rel.MCCImageReferences {
		if err := os.WriteFile(filepath.Join(mdir, filepath.Base(mco.ImageReferencesFile)), refs, 0o600); err != nil {
			return nil, err
		}
	}
	for _, l := range []struct {
		gvr  kube.GroupVersionResource
		skip func(kube.Unstructured) bool
	}{
		{machineConfigs, func(o kube.Unstructured) bool {
			_, gen := o.GetAnnotations()["machineconfiguration.openshift.io/generated-by-controller-version"]
			return gen || strings.HasPrefix(o.GetName(), "rendered-")
		}},
		{configGVR("imagedigestmirrorsets"), nil},
		{configGVR("imagetagmirrorsets"), nil},
	} {
		list, err := dyn.Resource(l.gvr).List(ctx, kube.ListOptions{})
		if err != nil {
			if kube.IsNotFound(err) {
				continue // the CRD is not served: none
			}
			return nil, fmt.Errorf("rehearsal: MCO stand-in: list %s: %w", l.gvr.Resource, err)
		}
		for _, o := range list.Items {
			if l.skip != nil && l.skip(o) {
				continue
			}
			b, err := json.Marshal(o.Object)
			if err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(mdir, "cluster-"+l.gvr.Resource+"-"+o.GetName()+".yaml"), b, 0o600); err != nil {
				return nil, err
			}
		}
	}
	out := filepath.Join(m.Work, "mcs-bootstrap")
	pull := filepath.Join(dest, filepath.FromSlash(mco.OperatorPullSecret))
	if b, err := exec.CommandContext(ctx, m.Controller, mco.ControllerArgs(m.Templates, mdir, out, pull, version)...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("rehearsal: MCO stand-in: machine-config-controller bootstrap: %w\n%s", err, mco.Tail(b, 15))
	}

	// The render controller's writes: the rendered MachineConfigs, then the pools.
	rendered := MCORendered{}
	for _, pool := range mco.Pools {
		pb, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(mco.PoolFile(pool))))
		if err != nil {
			return nil, fmt.Errorf("rehearsal: MCO stand-in: %w", err)
		}
		name, err := mco.RenderedName(pb)
		if err != nil {
			return nil, err
		}
		mb, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(mco.MachineConfigFile(name))))
		if err != nil {
			return nil, fmt.Errorf("rehearsal: MCO stand-in: %w", err)
		}
		// The pool first (the operator's syncMachineConfigPools), then the rendered config it
		// owns (the render controller sets the pool as its controller owner), then the pool's
		// status.configuration (syncStatusOnly).
		if err := createObject(ctx, dyn, machineConfigPools, pb, false); err != nil {
			return nil, err
		}
		po, err := dyn.Resource(machineConfigPools).Get(ctx, pool, kube.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("rehearsal: MCO stand-in: pool %s: %w", pool, err)
		}
		var mobj map[string]any
		if err := yaml.Unmarshal(mb, &mobj); err != nil {
			return nil, fmt.Errorf("rehearsal: MCO stand-in: %s: %w", name, err)
		}
		if md, ok := mobj["metadata"].(map[string]any); ok {
			yes := true
			md["ownerReferences"] = []any{map[string]any{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
				"name": pool, "uid": po.GetUID(), "controller": yes, "blockOwnerDeletion": yes}}
		}
		if mb, err = json.Marshal(mobj); err != nil {
			return nil, err
		}
		if err := createObject(ctx, dyn, machineConfigs, mb, false); err != nil {
			return nil, err
		}
		if err := createObject(ctx, dyn, machineConfigPools, pb, true); err != nil {
			return nil, err
		}
		rendered[pool] = name
	}
	if err := m.syncServer(ctx, dyn, filepath.Join(dest, filepath.FromSlash(mco.OperatorManifestDir), "machineconfigcontroller-controllerconfig.yaml"), rootCA); err != nil {
		return rendered, err
	}
	return rendered, nil
}

// MCSCABundle is the operator's getMCSCABundle (machine-config-operator release-4.20 and
// release-4.22 pkg/operator/sync.go): ConfigMap
// openshift-machine-config-operator/machine-config-server-ca ca-bundle.crt, which the 4.19+
// installer hands over (handedOver), else, when that ConfigMap does not exist, kube-system/root-ca
// ca.crt. From 4.19 syncRenderConfig puts it in ControllerConfig rootCAData and in the pointer
// config nodes boot from (ctrlcommon.PointerConfig(ignitionHost, machineConfigServerCABundle));
// release-4.18 reads kube-system/root-ca for both.
func MCSCABundle(ctx context.Context, dyn kube.Interface) (bundle []byte, handedOver bool, err error) {
	const reader = "machine-config-operator (release-4.22) pkg/operator/sync.go getMCSCABundle"
	d, err := objectData(ctx, dyn, configMaps, MCONamespace, "machine-config-server-ca", reader, "ca-bundle.crt")
	if err == nil {
		return d["ca-bundle.crt"], true, nil
	}
	if !kube.IsNotFound(errors.Unwrap(err)) {
		return nil, false, err
	}
	root, err := objectData(ctx, dyn, configMaps, "kube-system", "root-ca", reader, "ca.crt")
	if err != nil {
		return nil, false, err
	}
	return root["ca.crt"], false, nil
}

// mcsObjects are what the operator's syncMachineConfigServer applies for the server besides its
// DaemonSet (release-4.18 manifests/machineconfigserver: node-bootstrapper-sa.yaml,
// node-bootstrapper-token.yaml, csr-bootstrap-role-binding.yaml, csr-renewal-role-binding.yaml):
// the node-bootstrapper ServiceAccount whose token the server hands nodes, and the bindings that
// let that identity request node CSRs and nodes renew theirs.
var mcsObjects = []string{`apiVersion: v1
kind: ServiceAccount
metadata: {namespace: ` + MCONamespace + `, name: node-bootstrapper}`,
	`apiVersion: v1
kind: Secret
metadata:
  annotations: {kubernetes.io/service-account.name: node-bootstrapper}
  name: node-bootstrapper-token
  namespace: ` + MCONamespace + `
type: kubernetes.io/service-account-token`,
	`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: system-bootstrap-node-bootstrapper}
subjects: [{kind: ServiceAccount, name: node-bootstrapper, namespace: ` + MCONamespace + `}]
roleRef: {kind: ClusterRole, name: "system:node-bootstrapper", apiGroup: rbac.authorization.k8s.io}`,
	`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: system-bootstrap-node-renewal}
subjects: [{kind: Group, name: "system:nodes", apiGroup: rbac.authorization.k8s.io}]
roleRef: {kind: ClusterRole, name: "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", apiGroup: rbac.authorization.k8s.io}`,
}

var (
	serviceAccountsGVR     = kube.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	clusterRoleBindingsGVR = kube.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
	namespacesGVR          = kube.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// syncServer is the rest of what the operator writes for the machine-config-server and the
// machines (pkg/operator/sync.go): the ControllerConfig (syncRenderConfig: the server reads
// its kubeAPIServerServingCAData), the server's objects (mcsObjects, syncMachineConfigServer)
// and, where openshift-machine-api exists, each pool's <pool>-user-data-managed Secret with the
// pointer config (syncMachineConfigPools, manifests/userdata_secret.yaml;
// ctrlcommon.PointerConfig(getIgnitionHost(infra.Status), rootCA); rootCA is the MCS CA bundle
// from 4.19, MCSCABundle).
func (m *MCOInCluster) syncServer(ctx context.Context, dyn kube.Interface, controllerConfig string, rootCA []byte) error {
	cc, err := os.ReadFile(controllerConfig)
	if err != nil {
		return fmt.Errorf("rehearsal: MCO stand-in: %w", err)
	}
	if err := createObject(ctx, dyn, controllerConfigs, cc, false); err != nil {
		return err
	}
	for _, doc := range mcsObjects {
		var gvr kube.GroupVersionResource
		switch {
		case strings.Contains(doc, "kind: ServiceAccount\n"):
			gvr = serviceAccountsGVR
		case strings.Contains(doc, "kind: Secret\n"):
			gvr = secrets
		default:
			gvr = clusterRoleBindingsGVR
		}
		if err := createObject(ctx, dyn, gvr, []byte(doc), false); err != nil {
			return err
		}
	}
	if _, err := dyn.Resource(namespacesGVR).Get(ctx, MachineAPINamespace, kube.GetOptions{}); err != nil {
		return nil // no machine API: no user data
	}
	infra, err := dyn.Resource(configGVR("infrastructures")).Get(ctx, "cluster", kube.GetOptions{})
	if err != nil {
		return &MissingObjectError{Object: "infrastructure cluster", Operator: mcoReader + " getIgnitionHost", Err: err}
	}
	host, err := ignitionHost(infra.Object)
	if err != nil {
		return err
	}
	for _, pool := range mco.Pools {
		ptr, err := PointerConfig(host, pool, rootCA)
		if err != nil {
			return err
		}
		doc, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
			"metadata": map[string]any{"name": pool + "-user-data-managed", "namespace": MachineAPINamespace},
			"data":     map[string]any{"disableTemplating": "dHJ1ZQo=", "userData": base64.StdEncoding.EncodeToString(ptr)}})
		if err := createObject(ctx, dyn, secrets, doc, false); err != nil {
			return err
		}
	}
	return nil
}

// ignitionHost is getIgnitionHost (pkg/operator/sync.go): the internal API URL's host at the
// server's port 22623, or on platform BareMetal its first API internal IP (the API VIP).
func ignitionHost(infra map[string]any) (string, error) {
	if ips, ok := dig(infra, "status", "platformStatus", "baremetal", "apiServerInternalIPs").([]any); ok && len(ips) > 0 {
		if t, _ := dig(infra, "status", "platformStatus", "type").(string); t == "BareMetal" {
			return net.JoinHostPort(fmt.Sprint(ips[0]), "22623"), nil
		}
	}
	u, _ := dig(infra, "status", "apiServerInternalURI").(string)
	pu, err := url.Parse(u)
	if err != nil || pu.Hostname() == "" {
		return "", &MissingObjectError{Object: "infrastructure cluster[status.apiServerInternalURI]", Operator: mcoReader + " getIgnitionHost", Err: fmt.Errorf("%q", u)}
	}
	return net.JoinHostPort(pu.Hostname(), "22623"), nil
}

// PointerConfig is the MCO's pointer config for pool (pkg/controller/common/helpers.go
// PointerConfig, the {{.Role}} of its merge source rendered): an Ignition 3.4 config whose
// only content is a merge of https://<host>/config/<pool> and the root CA that server's
// certificate is trusted with. No file, no /etc/hostname: the node's name is what DHCP gives it.
func PointerConfig(host, pool string, rootCA []byte) ([]byte, error) {
	src := "https://" + host + "/config/" + pool
	ca := "data:text/plain;charset=utf-8;base64," + base64.StdEncoding.EncodeToString(rootCA)
	return json.Marshal(map[string]any{"ignition": map[string]any{
		"config":   map[string]any{"merge": []any{map[string]any{"source": src}}},
		"security": map[string]any{"tls": map[string]any{"certificateAuthorities": []any{map[string]any{"source": ca}}}},
		"version":  "3.4.0",
	}})
}

// SyncKubeconfigData is syncMachineConfigServer's copy of
// openshift-config-managed/kube-apiserver-server-ca into ConfigMap
// openshift-machine-config-operator/kubeconfig-data (binaryData ca-bundle.crt), the CA of the
// kubeconfigs the server hands out; nothing while the source does not exist.
func SyncKubeconfigData(ctx context.Context, dyn kube.Interface) error {
	src, err := objectData(ctx, dyn, configMaps, "openshift-config-managed", "kube-apiserver-server-ca", mcoReader+" syncMachineConfigServer", "ca-bundle.crt")
	if err != nil {
		return nil
	}
	want := base64.StdEncoding.EncodeToString(src["ca-bundle.crt"])
	cm, err := dyn.Resource(configMaps).Namespace(MCONamespace).Get(ctx, "kubeconfig-data", kube.GetOptions{})
	if err == nil {
		if got, _, _ := kube.NestedString(cm.Object, "binaryData", "ca-bundle.crt"); got == want {
			return nil
		}
		cm.Object["binaryData"] = map[string]any{"ca-bundle.crt": want}
		_, err = dyn.Resource(configMaps).Namespace(MCONamespace).Update(ctx, cm, kube.UpdateOptions{})
		return err
	}
	_, err = dyn.Resource(configMaps).Namespace(MCONamespace).Create(ctx, &kube.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "kubeconfig-data", "namespace": MCONamespace}, "binaryData": map[string]any{"ca-bundle.crt": want}}}, kube.CreateOptions{})
	return err
}

// mcoImageReferences turns images.json and the OS image ConfigMap back into the image-references
// ImageStream the operator's bootstrap reads (the tags of pkg/operator/bootstrap.go), for
// release row rel (its node OS tag and the tags its bootstrap requires).
func mcoImageReferences(images map[string]string, osurl map[string][]byte, rel releases.Release) ([]byte, error) {
	tags := map[string]string{
		"machine-config-operator":     images["machineConfigOperator"],
		"pod":                         images["infraImage"],
		"keepalived-ipfailover":       images["keepalivedImage"],
		"coredns":                     images["corednsImage"],
		"haproxy-router":              images["haproxyImage"],
		"baremetal-runtimecfg":        images["baremetalRuntimeCfgImage"],
		"oauth-proxy":                 images["oauthProxy"],
		"kube-rbac-proxy":             images["kubeRbacProxy"],
		"docker-registry":             images["dockerRegistryImage"],
		rel.BaseOSTag:                 string(osurl["baseOSContainerImage"]),
		rel.BaseOSTag + "-extensions": string(osurl["baseOSExtensionsContainerImage"]),
	}
	names := make([]string, 0, len(tags))
	for n := range tags {
		names = append(names, n)
	}
	sort.Strings(names)
	var list []any
	for _, n := range names {
		if tags[n] != "" {
			list = append(list, map[string]any{"name": n, "from": map[string]any{"kind": "DockerImage", "name": tags[n]}})
		}
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
		"metadata": map[string]any{"name": images["releaseVersion"]}, "spec": map[string]any{"tags": list}})
	if err != nil {
		return nil, err
	}
	// The tags the release's bootstrap requires (4.22 adds docker-registry).
	if err := mco.CheckImageReferences(b, rel.MCORequiredTags); err != nil {
		return nil, fmt.Errorf("rehearsal: MCO stand-in: images.json: %w", err)
	}
	return b, nil
}

// createObject creates the YAML or JSON object doc unless it exists; withStatus also applies its
// status through the status subresource (a pool's status.configuration, as the render
// controller's syncStatusOnly writes it).
func createObject(ctx context.Context, dyn kube.Interface, gvr kube.GroupVersionResource, doc []byte, withStatus bool) error {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return fmt.Errorf("rehearsal: MCO stand-in: %w", err)
	}
	u := &kube.Unstructured{Object: obj}
	status, hasStatus := obj["status"].(map[string]any)
	delete(obj, "status")
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	var ri kube.ResourceInterface = dyn.Resource(gvr)
	if ns := u.GetNamespace(); ns != "" {
		ri = dyn.Resource(gvr).Namespace(ns)
	}
	_, err := ri.Create(ctx, u, kube.CreateOptions{})
	if err != nil && !kube.IsAlreadyExists(err) {
		return fmt.Errorf("rehearsal: MCO stand-in: create %s %s: %w", gvr.Resource, u.GetName(), err)
	}
	if withStatus && hasStatus {
		pruneNulls(status)
		if _, err := kube.PatchStatus(ctx, ri, u.GetAPIVersion(), u.GetKind(), u.GetName(), status); err != nil {
			return fmt.Errorf("rehearsal: MCO stand-in: status of %s %s: %w", gvr.Resource, u.GetName(), err)
		}
	}
	return nil
}

// pruneNulls removes the null values of m, recursively: a Go encoder writes an empty list as
// null, which the CRD's schema refuses where it wants an array (a pool's status.conditions).
func pruneNulls(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			pruneNulls(x)
		}
	}
}
