package rehearsal

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"

	kubecontrolplanev1 "github.com/openshift/api/kubecontrolplane/v1"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/render/manifests"
)

// OpenShiftConfigFlag is the flag of openshift/kubernetes's kube-apiserver naming its
// KubeAPIServerConfig file; upstream kube-apiserver has no such flag.
const OpenShiftConfigFlag = "--openshift-config"

// OpenShiftConfigDropped lists, by flag, what the rehearsal's upstream kube-apiserver cannot do
// of what OpenShift's does with --openshift-config; docs/rehearsal.md's table repeats it.
var OpenShiftConfigDropped = map[string]string{
	"admission-control-config-file": "ConfigToFlags writes admission.pluginConfig to a temporary file; of its plugins upstream knows only PodSecurity, whose config enforces privileged with the Default feature set, upstream's default (its restricted audit and warn levels, and restricted enforcement under TechPreviewNoUpgrade, are not played)",
	"enable-admission-plugins":      "OpenShift's group-qualified plugins (the SCC admission among them) are registered only by openshift/kubernetes; the upstream ones stay",
	"authorization-mode":            "Scope and SystemMasters are OpenShift's authorizers; upstream authorizes system:masters implicitly, and no scoped OAuth token exists before the OAuth server",
	"feature-gates":                 "the cluster's OpenShift gates: openshift/kubernetes sets the ones it knows and warns on the rest (library-go features.SetFeatureGates); upstream refuses an unknown gate, so none is passed",
}

// OpenShiftConfigArgs plays what openshift/kubernetes's kube-apiserver does with
// --openshift-config for the upstream kube-apiserver the rehearsal runs: it reads the
// KubeAPIServerConfig file (read maps the flag's path, as the container sees it, to the file's
// bytes) and turns it into flags as openshift-kube-apiserver/openshiftkubeapiserver/flags.go
// ConfigToFlags does: apiServerArguments as they are, then, each only where apiServerArguments
// lacks it, bind-address and secure-port from servingInfo.bindAddress, cors-allowed-origins,
// service-account-key-file (serviceAccountPublicKeyFiles), service-cluster-ip-range
// (servicesSubnet), tls-cipher-suites, tls-min-version and tls-sni-cert-key (namedCertificates),
// in name order (apiserver-library-go configflags ToFlagSlice). OpenShift parses them after the
// command line (cmd/kube-apiserver/app/server.go), so a flag in both would be overridden
// silently; here that is an error naming the flag, unless both say the same. What upstream
// cannot do is dropped (OpenShiftConfigDropped). args without the flag come back unchanged.
func OpenShiftConfigArgs(args []string, read func(path string) ([]byte, error)) ([]string, error) {
	var cfgPath string
	var cmdline []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, OpenShiftConfigFlag+"="); ok {
			cfgPath = v
			continue
		}
		cmdline = append(cmdline, a)
	}
	if cfgPath == "" {
		return args, nil
	}
	b, err := read(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", OpenShiftConfigFlag, err)
	}
	var tm struct{ APIVersion, Kind string }
	if err := yaml.Unmarshal(b, &tm); err != nil {
		return nil, fmt.Errorf("%s %s: %w", OpenShiftConfigFlag, cfgPath, err)
	}
	if tm.APIVersion != "kubecontrolplane.config.openshift.io/v1" || tm.Kind != "KubeAPIServerConfig" {
		return nil, fmt.Errorf("%s %s: %s %s, want kubecontrolplane.config.openshift.io/v1 KubeAPIServerConfig", OpenShiftConfigFlag, cfgPath, tm.APIVersion, tm.Kind)
	}
	// Not strict: GetOpenshiftConfig decodes with the scheme's universal decoder.
	var c kubecontrolplanev1.KubeAPIServerConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s %s: %w", OpenShiftConfigFlag, cfgPath, err)
	}
	if c.AuditConfig.Enabled {
		return nil, fmt.Errorf("%s %s: auditConfig.enabled: the rehearsal does not play OpenShift's audit flags", OpenShiftConfigFlag, cfgPath)
	}
	fileArgs := map[string][]string{}
	for k, v := range c.APIServerArguments {
		fileArgs[k] = slices.Clone([]string(v))
	}
	host, port, err := net.SplitHostPort(c.ServingInfo.BindAddress)
	if err != nil {
		return nil, fmt.Errorf("%s %s: servingInfo.bindAddress: %w", OpenShiftConfigFlag, cfgPath, err)
	}
	setIfUnset := func(k string, v ...string) {
		if _, ok := fileArgs[k]; !ok {
			fileArgs[k] = v
		}
	}
	setIfUnset("bind-address", host)
	setIfUnset("cors-allowed-origins", c.CORSAllowedOrigins...)
	setIfUnset("secure-port", port)
	setIfUnset("service-account-key-file", c.ServiceAccountPublicKeyFiles...)
	setIfUnset("service-cluster-ip-range", c.ServicesSubnet)
	setIfUnset("tls-cipher-suites", c.ServingInfo.CipherSuites...)
	setIfUnset("tls-min-version", c.ServingInfo.MinTLSVersion)
	var sni []string
	for _, nc := range c.ServingInfo.NamedCertificates {
		names := ""
		if len(nc.Names) > 0 {
			names = ":" + strings.Join(nc.Names, ",")
		}
		sni = append(sni, nc.CertFile+","+nc.KeyFile+names)
	}
	setIfUnset("tls-sni-cert-key", sni...)
	// What upstream cannot do (OpenShiftConfigDropped).
	delete(fileArgs, "feature-gates")
	fileArgs["enable-admission-plugins"] = slices.DeleteFunc(fileArgs["enable-admission-plugins"], manifests.OpenShiftAdmissionPlugin)
	fileArgs["authorization-mode"] = slices.DeleteFunc(fileArgs["authorization-mode"], func(m string) bool { return m == "Scope" || m == "SystemMasters" })
	for _, k := range []string{"enable-admission-plugins", "authorization-mode"} {
		if len(fileArgs[k]) == 0 {
			delete(fileArgs, k)
		}
	}
	onCmdline := map[string]string{}
	for _, a := range cmdline {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		onCmdline[k] = v
	}
	keys := make([]string, 0, len(fileArgs))
	for k := range fileArgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := cmdline
	for _, k := range keys {
		vs := fileArgs[k]
		if len(vs) == 0 {
			continue
		}
		joined := strings.Join(vs, ",")
		if v, ok := onCmdline[k]; ok {
			if v != joined {
				return nil, fmt.Errorf("%s %s: --%s is on the command line (%s) and in the file (%s): OpenShift's kube-apiserver would override the command line silently", OpenShiftConfigFlag, cfgPath, k, v, joined)
			}
			continue
		}
		if k == "tls-sni-cert-key" { // its values hold commas: one flag each, as ToFlagSlice
			for _, v := range vs {
				out = append(out, "--"+k+"="+v)
			}
			continue
		}
		// ToFlagSlice repeats a list flag per value; upstream's string-slice flags append
		// repeats, so one comma-joined flag says the same and keeps each flag once.
		out = append(out, "--"+k+"="+joined)
	}
	return out, nil
}
