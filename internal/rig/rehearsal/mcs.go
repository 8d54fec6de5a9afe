package rehearsal

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/targets/kube"
)

// MCSStandin is a STAND-IN for the in-cluster machine-config-server (MCO release-4.18
// pkg/server/cluster_server.go, run by the operator as DaemonSet machine-config-server,
// host-networked on every master, port 22623): the server a node booted from the MCO's pointer
// config (worker-user-data-managed: ignition.config.merge https://<API VIP>:22623/config/<pool>)
// takes its config from. It reads only what the real server reads, from the cluster:
//
//	MachineConfigPool <pool>          status.configuration.name (spec's when a machine updated)
//	MachineConfig <that name>         spec.config, the content served
//	ControllerConfig machine-config-controller  spec.kubeAPIServerServingCAData → /etc/kubernetes/kubelet-ca.crt
//	Secret openshift-machine-config-operator/node-bootstrapper-token  token and ca.crt (the
//	                                  server's /etc/mcs/bootstrap-token mount): the kubeconfig's credential
//	ConfigMap openshift-machine-config-operator/kubeconfig-data  ca-bundle.crt, the kubeconfig's CA when present
//	Secret openshift-machine-config-operator/machine-config-server-tls  its serving certificate
//
// and appends what getAppenders appends (render/ignition.MCSFiles: kubelet-ca.crt, the
// kubeconfig, node-annotations.json naming the MachineConfig, the encapsulated and full
// MachineConfig). APIServerURL is its --apiserver-url (the DaemonSet's
// {{.APIServerURL}}, Infrastructure status.apiServerInternalURI).
type MCSStandin struct {
	Kube         kube.Interface
	APIServerURL string
	Logf         func(format string, args ...any)
}

// mcsReader names the upstream code the MCS stand-in follows.
const mcsReader = "machine-config-server (machine-config-operator release-4.18) pkg/server/cluster_server.go GetConfig"

var controllerConfigs = kube.GroupVersionResource{Group: "machineconfiguration.openshift.io", Version: "v1", Resource: "controllerconfigs"}

// Config is the Ignition config (JSON) the server answers GET /config/<pool> with.
func (m *MCSStandin) Config(ctx context.Context, pool string) ([]byte, error) {
	p, err := m.Kube.Resource(machineConfigPools).Get(ctx, pool, kube.GetOptions{})
	if err != nil {
		return nil, &MissingObjectError{Object: "machineconfigpool " + pool, Operator: mcsReader, Err: err}
	}
	name, _, _ := kube.NestedString(p.Object, "status", "configuration", "name")
	if n := fmt.Sprint(dig(p.Object, "status", "updatedMachineCount")); n != "<nil>" && n != "0" {
		name, _, _ = kube.NestedString(p.Object, "spec", "configuration", "name")
	}
	o, err := m.Kube.Resource(machineConfigs).Get(ctx, name, kube.GetOptions{})
	if err != nil {
		return nil, &MissingObjectError{Object: "machineconfig " + name, Operator: mcsReader, Err: err}
	}
	b, err := json.Marshal(o.Object)
	if err != nil {
		return nil, err
	}
	mc, err := ignition.ParseMachineConfig(b)
	if err != nil {
		return nil, err
	}
	cc, err := m.Kube.Resource(controllerConfigs).Get(ctx, "machine-config-controller", kube.GetOptions{})
	if err != nil {
		return nil, &MissingObjectError{Object: "controllerconfig machine-config-controller", Operator: mcsReader, Err: err}
	}
	ccb, _ := json.Marshal(cc.Object)
	kubeletCA, err := ignition.KubeletCAFromControllerConfig(ccb)
	if err != nil {
		return nil, err
	}
	tok, err := objectData(ctx, m.Kube, secrets, MCONamespace, "node-bootstrapper-token", mcsReader+" kubeconfigFromSecret", "token", "ca.crt")
	if err != nil {
		return nil, err
	}
	ca := tok["ca.crt"]
	// The kubeconfig-data ConfigMap's bundle replaces the token's CA when it has one.
	if cm, err := m.Kube.Resource(configMaps).Namespace(MCONamespace).Get(ctx, "kubeconfig-data", kube.GetOptions{}); err == nil {
		if s, ok, _ := kube.NestedString(cm.Object, "binaryData", "ca-bundle.crt"); ok && s != "" {
			if d, err := base64.StdEncoding.DecodeString(s); err == nil {
				ca = d
			}
		}
	}
	kc, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "Config",
		"clusters":        []any{map[string]any{"name": "local", "cluster": map[string]any{"server": m.APIServerURL, "certificate-authority-data": ca}}},
		"users":           []any{map[string]any{"name": "kubelet", "user": map[string]any{"token": string(tok["token"])}}},
		"contexts":        []any{map[string]any{"name": "kubelet", "context": map[string]any{"cluster": "local", "user": "kubelet"}}},
		"current-context": "kubelet", "preferences": map[string]any{}})
	if err != nil {
		return nil, err
	}
	files, err := ignition.MCSFiles(mc, kubeletCA, kc)
	if err != nil {
		return nil, err
	}
	cfg, err := ignition.Apply(mc.Config, ignition.Additions{Files: files})
	if err != nil {
		return nil, err
	}
	return ignition.Encode(cfg)
}

// Serve answers GET /config/<pool> on ln over TLS with the cluster's machine-config-server-tls
// certificate, as the real server (pkg/server/api.go: /config/ and /healthz), until ln closes.
func (m *MCSStandin) Serve(ctx context.Context, ln net.Listener) error {
	tlsData, err := objectData(ctx, m.Kube, secrets, MCONamespace, "machine-config-server-tls", mcsReader, "tls.crt", "tls.key")
	if err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(tlsData["tls.crt"], tlsData["tls.key"])
	if err != nil {
		return fmt.Errorf("rehearsal: MCS stand-in: machine-config-server-tls: %w", err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		pool, ok := strings.CutPrefix(r.URL.Path, "/config/")
		if !ok || pool == "" || strings.Contains(pool, "/") || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		b, err := m.Config(r.Context(), pool)
		if err != nil {
			if m.Logf != nil {
				m.Logf("MCS stand-in: /config/%s from %s: %v", pool, r.RemoteAddr, err)
			}
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if m.Logf != nil {
			m.Logf("MCS stand-in: served /config/%s (%d bytes) to %s", pool, len(b), r.RemoteAddr)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	srv := &http.Server{Handler: h}
	return srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}))
}
