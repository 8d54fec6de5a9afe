package manifests

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Bootstrap config files: manifests/bootstrap-configs writes them, the collector places them
// under configs/, and the bootstrap Ignition writes configs/<file> to BootstrapConfigsDir/<file>,
// where the installer's bootkube.sh copies its operators' rendered configs
// (/etc/kubernetes/bootstrap-configs/kube-apiserver-config.yaml,
// cluster-policy-controller-config.yaml); the pods see the directory at ConfigMountPath.
const (
	// BootstrapConfigsDir holds the bootstrap control plane's config files on the node.
	BootstrapConfigsDir = "/etc/kubernetes/bootstrap-configs"
	// ConfigMountPath is where the bootstrap pods see BootstrapConfigsDir (the operators'
	// bootstrap pods mount it there: cluster-kube-apiserver-operator release-4.18
	// bindata/bootkube/bootstrap-manifests/kube-apiserver-pod.yaml volume "config").
	ConfigMountPath = "/etc/kubernetes/config"
	// KubeAPIServerConfigFile is the bootstrap kube-apiserver's --openshift-config file.
	KubeAPIServerConfigFile = "kube-apiserver-config.yaml"
	// ClusterPolicyControllerConfigFile is the bootstrap cluster-policy-controller's --config.
	ClusterPolicyControllerConfigFile = "cluster-policy-controller-config.yaml"
)

var (
	configVolume = hostPathVolume("config", BootstrapConfigsDir, "")
	configMount  = volumeMount{Name: "config", MountPath: ConfigMountPath, ReadOnly: true}
)

// KubeAPIServerAdmissionPlugins are the bootstrap kube-apiserver's --enable-admission-plugins,
// cluster-kube-apiserver-operator release-4.18 bindata/assets/config/defaultconfig.yaml
// apiServerArguments enable-admission-plugins (the render layers the bootstrap overrides on
// that file, and they keep the list). The names with a group ("security.openshift.io/…") are
// OpenShift's plugins, registered only by openshift/kubernetes (openshift-kube-apiserver
// admission/admissionenablement InstallOpenShiftAdmissionPlugins); the SCC admission among them
// gives every pod its openshift.io/scc (issue 38 #9).
var KubeAPIServerAdmissionPlugins = []string{
	"CertificateApproval", "CertificateSigning", "CertificateSubjectRestriction", "DefaultIngressClass",
	"DefaultStorageClass", "DefaultTolerationSeconds", "LimitRanger", "MutatingAdmissionWebhook",
	"NamespaceLifecycle", "NodeRestriction", "OwnerReferencesPermissionEnforcement",
	"PersistentVolumeClaimResize", "PodNodeSelector", "PodTolerationRestriction", "Priority",
	"ResourceQuota", "RuntimeClass", "ServiceAccount", "StorageObjectInUseProtection",
	"TaintNodesByCondition", "ValidatingAdmissionWebhook", "ValidatingAdmissionPolicy",
	"authorization.openshift.io/RestrictSubjectBindings",
	"authorization.openshift.io/ValidateRoleBindingRestriction",
	"config.openshift.io/DenyDeleteClusterConfiguration", "config.openshift.io/ValidateAPIServer",
	"config.openshift.io/ValidateAuthentication", "config.openshift.io/ValidateConsole",
	"config.openshift.io/ValidateFeatureGate", "config.openshift.io/ValidateImage",
	"config.openshift.io/ValidateOAuth", "config.openshift.io/ValidateProject",
	"config.openshift.io/ValidateScheduler", "image.openshift.io/ImagePolicy",
	"network.openshift.io/ExternalIPRanger", "network.openshift.io/RestrictedEndpointsAdmission",
	"quota.openshift.io/ClusterResourceQuota", "quota.openshift.io/ValidateClusterResourceQuota",
	"route.openshift.io/IngressAdmission", "scheduling.openshift.io/OriginPodNodeEnvironment",
	"security.openshift.io/DefaultSecurityContextConstraints", "security.openshift.io/SCCExecRestrictions",
	"security.openshift.io/SecurityContextConstraint", "security.openshift.io/ValidateSecurityContextConstraints",
	"storage.openshift.io/CSIInlineVolumeSecurity",
}

// KubeAPIServerAuthorizationModes are the bootstrap kube-apiserver's --authorization-mode,
// defaultconfig.yaml's. With --openshift-config openshift/kubernetes drops the implicit
// system:masters authorizer (openshift-kube-apiserver/enablement
// ForceGlobalInitializationForOpenShift: authorizer.SkipSystemMastersAuthorizer), so
// SystemMasters must be listed; Scope authorizes scoped OAuth tokens.
var KubeAPIServerAuthorizationModes = []string{"Scope", "SystemMasters", "RBAC", "Node"}

// kubeAPIServerConfig mirrors the fields of github.com/openshift/api kubecontrolplane/v1
// KubeAPIServerConfig that labbuild writes.
type kubeAPIServerConfig struct {
	typeMeta
	Admission          admissionConfig     `json:"admission"`
	APIServerArguments map[string][]string `json:"apiServerArguments"`
	ServicesSubnet     string              `json:"servicesSubnet"`
	ServingInfo        bindInfo            `json:"servingInfo"`
}

// admissionConfig mirrors config/v1 AdmissionConfig (pluginConfig only).
type admissionConfig struct {
	PluginConfig map[string]admissionPluginConfig `json:"pluginConfig"`
}

// admissionPluginConfig mirrors config/v1 AdmissionPluginConfig; configuration is a raw
// object (runtime.RawExtension).
type admissionPluginConfig struct {
	Configuration map[string]any `json:"configuration"`
	Location      string         `json:"location"`
}

// bindInfo mirrors config/v1 ServingInfo's bind fields and certificate files (CertInfo,
// clientCA), each left out when empty.
type bindInfo struct {
	BindAddress string `json:"bindAddress"`
	BindNetwork string `json:"bindNetwork"`
	CertFile    string `json:"certFile,omitempty"`
	ClientCA    string `json:"clientCA,omitempty"`
	KeyFile     string `json:"keyFile,omitempty"`
}

// KubeAPIServerConfig renders the bootstrap kube-apiserver's --openshift-config file
// (KubeAPIServerConfigFile), as cluster-kube-apiserver-operator release-4.18's render writes
// it (pkg/cmd/render/render.go: bindata/assets/config/defaultconfig.yaml with
// bindata/bootkube/config/bootstrap-config-overrides.yaml layered on), limited to what
// OpenShift's admission needs. openshift/kubernetes turns the file into flags parsed after the
// command line (openshift-kube-apiserver/openshiftkubeapiserver/flags.go ConfigToFlags), so
// every setting here is said once, here, and the pod's own flags (KubeAPIServerPod) are
// labbuild's others:
//   - servingInfo (0.0.0.0:6443, tcp4) and servicesSubnet, which ConfigToFlags always turns
//     into --bind-address, --secure-port and --service-cluster-ip-range (an empty
//     servicesSubnet would override the command line with an empty range);
//   - apiServerArguments enable-admission-plugins (KubeAPIServerAdmissionPlugins) and
//     authorization-mode (KubeAPIServerAuthorizationModes);
//   - apiServerArguments feature-gates: the cluster's gates, FeatureGateArgs of gates
//     (bootstrap-config-overrides.yaml feature-gates, render.go setFeatureGatesFromAccessor);
//   - admission.pluginConfig: network.openshift.io/RestrictedEndpointsAdmission with the
//     service and cluster networks (bootstrap-config-overrides.yaml), ExternalIPRanger and
//     PodSecurity as defaultconfig.yaml has them, PodSecurity enforcing "restricted" when the
//     OpenShiftPodSecurityAdmission gate is enabled (TechPreviewNoUpgrade in 4.18) and
//     "privileged" otherwise (4.18 Default), as render.go bootstrapDefaultConfig sets it
//     (pkg/operator/configobservation/auth SetPodSecurityAdmissionToEnforceRestricted,
//     SetPodSecurityAdmissionToEnforcePrivileged).
//
// Left out of defaultconfig.yaml: audit, event TTL, request limits and the other tuning flags,
// which the bootstrap does without.
func KubeAPIServerConfig(serviceNetwork, clusterNetwork string, gates FeatureGateStatus) ([]byte, error) {
	if err := checkCIDR("kube-apiserver config: service network", serviceNetwork); err != nil {
		return nil, err
	}
	if err := checkCIDR("kube-apiserver config: cluster network", clusterNetwork); err != nil {
		return nil, err
	}
	fg, err := FeatureGateArgs(gates)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver config: %w", err)
	}
	enforce := "privileged"
	if slices.Contains(gates.Enabled, "OpenShiftPodSecurityAdmission") {
		enforce = "restricted"
	}
	c := kubeAPIServerConfig{
		typeMeta: typeMeta{APIVersion: "kubecontrolplane.config.openshift.io/v1", Kind: "KubeAPIServerConfig"},
		Admission: admissionConfig{PluginConfig: map[string]admissionPluginConfig{
			"network.openshift.io/ExternalIPRanger": {Configuration: map[string]any{
				"apiVersion": "network.openshift.io/v1", "kind": "ExternalIPRangerAdmissionConfig",
				"allowIngressIP": true, "externalIPNetworkCIDRs": nil,
			}},
			"network.openshift.io/RestrictedEndpointsAdmission": {Configuration: map[string]any{
				"apiVersion": "network.openshift.io/v1", "kind": "RestrictedEndpointsAdmissionConfig",
				"restrictedCIDRs": []string{serviceNetwork, clusterNetwork},
			}},
			"PodSecurity": {Configuration: map[string]any{
				"apiVersion": "pod-security.admission.config.k8s.io/v1", "kind": "PodSecurityConfiguration",
				"defaults": map[string]string{
					"enforce": enforce, "enforce-version": "latest",
					"audit": "restricted", "audit-version": "latest",
					"warn": "restricted", "warn-version": "latest",
				},
				"exemptions": map[string]any{"usernames": []string{"system:serviceaccount:openshift-infra:build-controller"}},
			}},
		}},
		APIServerArguments: map[string][]string{
			"enable-admission-plugins": KubeAPIServerAdmissionPlugins,
			"authorization-mode":       KubeAPIServerAuthorizationModes,
			"feature-gates":            fg,
		},
		ServicesSubnet: serviceNetwork,
		ServingInfo:    bindInfo{BindAddress: "0.0.0.0:6443", BindNetwork: "tcp4"},
	}
	return marshal(&c)
}

// clusterPolicyControllerConfig mirrors the fields of github.com/openshift/api
// openshiftcontrolplane/v1 OpenShiftControllerManagerConfig that labbuild writes.
type clusterPolicyControllerConfig struct {
	typeMeta
	FeatureGates []string `json:"featureGates"`
	ServingInfo  bindInfo `json:"servingInfo"`
}

// FeatureGateArgs lists the cluster's feature gates as the operators' renders hand them to
// their operands: "<name>=true" for each enabled gate and "<name>=false" for each disabled one,
// sorted by name (library-go featuregates KnownFeatures; cluster-kube-apiserver-operator and
// cluster-kube-controller-manager-operator release-4.18 pkg/cmd/render/render.go
// setFeatureGatesFromAccessor). A status without gates is an error.
func FeatureGateArgs(gates FeatureGateStatus) ([]string, error) {
	if len(gates.Enabled)+len(gates.Disabled) == 0 {
		return nil, errors.New("the FeatureGate status lists no gates")
	}
	var out []string
	for _, g := range gates.Enabled {
		out = append(out, g+"=true")
	}
	for _, g := range gates.Disabled {
		out = append(out, g+"=false")
	}
	sort.Strings(out)
	return out, nil
}

// ClusterPolicyControllerConfig renders the bootstrap cluster-policy-controller's --config
// (ClusterPolicyControllerConfigFile), as cluster-kube-controller-manager-operator
// release-4.18's render writes it (pkg/cmd/render/render.go: bindata/assets/config/
// default-cluster-policy-controller-config.yaml, servingInfo 127.0.0.1:10357 tcp, with
// bindata/bootkube/config/bootstrap-cluster-policy-controller-config-overrides.yaml layered
// on). The installer serves it with the kube-control-plane signer's controller-manager client
// pair and that signer's bundle as client CA; labbuild's bootstrap has no such signer, so the
// controller serves the bootstrap kube-apiserver's pair (its SANs include localhost, which the
// probes ask) and takes the kube-apiserver's client CA bundle. featureGates are the cluster's
// (FeatureGateArgs), as the overrides write them.
func ClusterPolicyControllerConfig(gates FeatureGateStatus) ([]byte, error) {
	fg, err := FeatureGateArgs(gates)
	if err != nil {
		return nil, fmt.Errorf("cluster-policy-controller config: %w", err)
	}
	c := clusterPolicyControllerConfig{
		typeMeta:     typeMeta{APIVersion: "openshiftcontrolplane.config.openshift.io/v1", Kind: "OpenShiftControllerManagerConfig"},
		FeatureGates: fg,
		ServingInfo: bindInfo{
			BindAddress: "127.0.0.1:10357", BindNetwork: "tcp",
			CertFile: inPod("kube-apiserver.crt"), KeyFile: inPod("kube-apiserver.key"),
			ClientCA: inPod("kube-apiserver-client-ca-bundle.crt"),
		},
	}
	return marshal(&c)
}

// OpenShiftAdmissionPlugin reports whether an admission plugin name is one of OpenShift's
// (a group-qualified name, "security.openshift.io/SecurityContextConstraint"), which only
// openshift/kubernetes registers.
func OpenShiftAdmissionPlugin(name string) bool { return strings.Contains(name, "/") }

// inConfig returns the path a pod sees for config file name (a base name in BootstrapConfigsDir).
func inConfig(name string) string { return ConfigMountPath + "/" + name }

// ClusterPolicyControllerRBACFiles renders the ClusterRoles and ClusterRoleBindings of the
// cluster-policy-controller's controllers, which run as service accounts in openshift-infra, as
// the installer's bootstrap applies them from cluster-kube-controller-manager-operator
// release-4.18's render (bindata/bootkube/manifests/
// 00_namespace-security-allocation-controller-clusterrole{,binding}.yaml,
// 00_podsecurity-admission-label-syncer-controller-clusterrole{,binding}.yaml,
// 00_podsecurity-admission-label-privileged-namespaces-syncer-controller-clusterrole{,binding}.yaml;
// after the pivot the operator applies the same objects from bindata/assets/kube-controller-manager).
// Without them the bootstrap's cluster-policy-controller is refused, and namespaces get no
// openshift.io/sa.scc.* annotations before the pivot (issue 38 #9).
func ClusterPolicyControllerRBACFiles() ([]File, error) {
	const prefix = "system:openshift:controller:"
	core := []string{""}
	events := policyRule{APIGroups: core, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}}
	nsRW := policyRule{APIGroups: core, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "update", "watch", "patch"}}
	roles := []struct {
		role, sa string
		rules    []policyRule
	}{
		{"namespace-security-allocation-controller", "namespace-security-allocation-controller", []policyRule{
			{APIGroups: []string{"security.openshift.io", "security.internal.openshift.io"}, Resources: []string{"rangeallocations"}, Verbs: []string{"create", "get", "update"}},
			nsRW, events,
		}},
		{"podsecurity-admission-label-syncer-controller", "podsecurity-admission-label-syncer-controller", []policyRule{
			nsRW, events,
			{APIGroups: core, Resources: []string{"serviceaccounts"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"security.openshift.io"}, Resources: []string{"securitycontextconstraints"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles", "clusterrolebindings", "roles", "rolebindings"}, Verbs: []string{"get", "list", "watch"}},
		}},
		{"privileged-namespaces-psa-label-syncer", "privileged-namespaces-psa-label-syncer", []policyRule{
			{APIGroups: core, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: core, Resources: []string{"namespaces"}, ResourceNames: []string{"default", "kube-system", "kube-public"}, Verbs: []string{"patch"}},
		}},
	}
	var out []File
	for _, r := range roles {
		name := prefix + r.role
		file := OrderRBAC + "-cluster-policy-controller-" + r.role
		a, err := newFile(file+"-clusterrole.yaml", &clusterRole{
			typeMeta: typeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			Metadata: meta(name, ""),
			Rules:    r.rules,
		})
		if err != nil {
			return nil, err
		}
		b, err := newFile(file+"-clusterrolebinding.yaml", &clusterRoleBinding{
			typeMeta: typeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			Metadata: meta(name, ""),
			RoleRef:  roleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects: []subject{{Kind: "ServiceAccount", Name: r.sa, Namespace: "openshift-infra"}},
		})
		if err != nil {
			return nil, err
		}
		out = append(out, a, b)
	}
	return out, nil
}
