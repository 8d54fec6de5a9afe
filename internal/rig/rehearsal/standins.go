package rehearsal

// Stand-ins for what OpenShift's operators do on the masters, where their images cannot run
// here. Each takes its inputs from the cluster objects the operator it plays reads (the
// etcd-signer Secret and etcd-ca-bundle ConfigMap; operators.go for the kube-apiserver- and
// kube-controller-manager-operators' objects), and starts the real programs (etcd,
// kube-apiserver, kube-controller-manager, etcdctl): they stand in only for *who* starts them
// and with which files. Flags that are an operator's own configuration come from the
// bootstrap's static pods. docs/rehearsal.md lists them and what each reads.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/targets/kube"
)

// Node paths of the etcd member's certificates, as the cluster-etcd-operator's installer lays
// them out on a master (etcd-pod.yaml's static-pod-certs volume).
const (
	etcdCertDir   = "/etc/kubernetes/static-pod-certs/secrets/etcd-all-certs"
	etcdBundleDir = "/etc/kubernetes/static-pod-certs/configmaps/etcd-all-bundles"
	// EtcdStandinHealthPort is the stand-in etcd member's plain-HTTP metrics listener
	// (--listen-metrics-urls), whose /health the stand-in etcd pod's readiness probe reads. The
	// operator's member listens for metrics on https://0.0.0.0:9978 with the metrics signer's
	// certificates; plain HTTP keeps the probe to what the kubelet's httpGet can do unaided.
	EtcdStandinHealthPort = 9980
)

var (
	secrets    = kube.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMaps = kube.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// Signer is a CA certificate and its key, PEM.
type Signer struct{ Cert, Key []byte }

// SignerFromSecret reads a kubernetes.io/tls Secret (tls.crt, tls.key) — the etcd-signer
// labbuild applied (targets/manifests.go "etcd-signer", openshift-config as the installer's
// bootstrap does; openshift-etcd also tried).
func SignerFromSecret(ctx context.Context, k *kube.Clients, name string) (Signer, error) {
	var errs []error
	for _, ns := range []string{"openshift-config", "openshift-etcd"} {
		s, err := k.Dynamic.Resource(secrets).Namespace(ns).Get(ctx, name, kube.GetOptions{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		crt, _, _ := kube.NestedString(s.Object, "data", "tls.crt")
		key, _, _ := kube.NestedString(s.Object, "data", "tls.key")
		c, cerr := base64.StdEncoding.DecodeString(crt)
		kb, kerr := base64.StdEncoding.DecodeString(key)
		if len(c) == 0 || len(kb) == 0 || cerr != nil || kerr != nil {
			return Signer{}, fmt.Errorf("secret %s/%s has no tls.crt/tls.key", ns, name)
		}
		return Signer{Cert: c, Key: kb}, nil
	}
	return Signer{}, errors.Join(errs...)
}

// Issue signs a new ECDSA P-256 leaf for cn with the given SANs and extended key usages
// (server and client: an etcd member's serving and peer certificates are both, as the
// operator's tlshelpers issue them), valid 24 h. It returns the certificate and key, PEM.
func (s Signer) Issue(cn string, ips []string, dns []string, serverAuth, clientAuth bool) (certPEM, keyPEM []byte, err error) {
	return s.issue(cn, []string{"system:etcd-servers"}, ips, dns, serverAuth, clientAuth, false)
}

func parseKey(der []byte) (any, error) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	return x509.ParsePKCS1PrivateKey(der)
}

// MasterStandins are the cluster-etcd-operator's and kube-apiserver-operator's part on one
// master, in the rehearsal: an etcd member joined to the bootstrap's etcd with certificates
// issued from labbuild's etcd-signer Secret, and the master's kube-apiserver started from the
// bootstrap's own kube-apiserver static pod (bootstrap.ign's command line and files, on the
// master: --etcd-servers=https://localhost:2379 is now the master's member).
type MasterStandins struct {
	Node *Node
	// NodeName is the Kubernetes node name (the FQDN in the node's /etc/hostname); the etcd
	// member is named after it, as the operator names members.
	NodeName, IP string
	// BootstrapIP is the bootstrap etcd's address; BootstrapRoot the bootstrap node's placed
	// Ignition (its static pods and /etc/kubernetes/bootstrap-secrets).
	BootstrapIP, BootstrapRoot string
	// Bins: etcd, etcdctl, kube-apiserver, kube-controller-manager, kube-scheduler.
	Bins map[string]string
	// Clients reaches the cluster's API (through the VIP).
	Clients func() (*kube.Clients, error)
	// Logf receives progress lines.
	Logf func(format string, args ...any)
	// EtcdJoin, when set, is held from the member add until the member is healthy: the
	// operator joins one master at a time, and etcd's strict reconfiguration check refuses an
	// add that would leave the started members without quorum.
	EtcdJoin sync.Locker
	// BeforeAPIServer, when set, runs once the etcd member is healthy and its pod written, before
	// the control plane starts; an error stops Run there (the withholding flow,
	// withhold_test.go, plays the old early bootstrap-complete signal at this point).
	BeforeAPIServer func(ctx context.Context) error
	// CVOPod, when set, also writes the cluster-version-operator's stand-in pod on this master
	// (standin_pods.go).
	CVOPod bool
}

// etcdCerts is the operator's etcdcertsigner for this master: once the API hands out the etcd
// signer and CA bundle, the member's serving, peer and client certificates, issued from it and
// installed at the operator's node paths (etcdCertDir, etcdBundleDir). It returns the staging
// directory, outside the node, where it wrote them first.
func (m *MasterStandins) etcdCerts(ctx context.Context) (string, error) {
	var signer Signer
	var bundle string
	for {
		k, err := m.Clients()
		if err == nil {
			signer, err = SignerFromSecret(ctx, k, "etcd-signer")
			if err == nil {
				cm, cerr := k.Dynamic.Resource(configMaps).Namespace("openshift-etcd").Get(ctx, "etcd-ca-bundle", kube.GetOptions{})
				if err = cerr; err == nil {
					bundle, _, _ = kube.NestedString(cm.Object, "data", "ca-bundle.crt")
					if bundle == "" {
						err = errors.New("configmap openshift-etcd/etcd-ca-bundle has no ca-bundle.crt")
					}
				}
			}
		}
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("etcd stand-in on %s: waiting for the etcd signer: %w (%v)", m.Node.Name, ctx.Err(), err)
		case <-time.After(3 * time.Second):
		}
	}
	staging := filepath.Join(filepath.Dir(m.Node.Root), "standin-etcd")
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return "", err
	}
	files := map[string][]byte{"server-ca-bundle.crt": []byte(bundle)}
	for _, c := range []struct {
		name           string
		server, client bool
	}{{"etcd-serving-" + m.NodeName, true, true}, {"etcd-peer-" + m.NodeName, true, true}, {"etcd-client", false, true}} {
		crt, key, err := signer.Issue(c.name, []string{m.IP, "127.0.0.1", "::1"}, []string{"localhost", m.NodeName}, c.server, c.client)
		if err != nil {
			return "", fmt.Errorf("etcd stand-in on %s: issue %s: %w", m.Node.Name, c.name, err)
		}
		files[c.name+".crt"], files[c.name+".key"] = crt, key
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(staging, name), b, 0o600); err != nil {
			return "", err
		}
	}
	// Copy into the node through its own mount namespace (its /etc is an overlay).
	if err := m.Node.Run(ctx, "standin-install", nil, "sh", "-c", fmt.Sprintf(
		"set -e; mkdir -p %[2]s %[3]s; cp %[1]s/etcd-* %[2]s/; cp %[1]s/server-ca-bundle.crt %[3]s/; mkdir -p /var/lib/etcd",
		staging, etcdCertDir, etcdBundleDir)); err != nil {
		return "", err
	}
	return staging, nil
}

// etcdctl runs real etcdctl in the master against endpoint with the member's client
// certificate (etcdCerts) and returns its output.
func (m *MasterStandins) etcdctl(endpoint string, args ...string) ([]byte, error) {
	argv := append([]string{m.Bins["etcdctl"], "--endpoints=" + endpoint, "--cacert=" + etcdBundleDir + "/server-ca-bundle.crt",
		"--cert=" + etcdCertDir + "/etcd-client.crt", "--key=" + etcdCertDir + "/etcd-client.key", "--command-timeout=20s"}, args...)
	cmd, err := m.Node.Command("etcdctl", []string{"ETCDCTL_API=3"}, nil, argv...)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("etcdctl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
	}
	return out.Bytes(), nil
}

// Run brings up the master's etcd member and then its kube-apiserver, waiting for the API to
// hand out the etcd signer (cluster/bootstrap applies it). It returns once both run, or the
// first error.
func (m *MasterStandins) Run(ctx context.Context) error {
	staging, err := m.etcdCerts(ctx)
	if err != nil {
		return err
	}
	cert := func(n string) string { return etcdCertDir + "/" + n }
	ca := etcdBundleDir + "/server-ca-bundle.crt"
	ctl := m.etcdctl
	if m.EtcdJoin != nil {
		m.EtcdJoin.Lock()
		defer m.EtcdJoin.Unlock()
	}
	peerURL := "https://" + net.JoinHostPort(m.IP, "2380")
	bootstrapEP := "https://" + net.JoinHostPort(m.BootstrapIP, "2379")
	// The operator's clustermembercontroller: add the master as a member of the running
	// cluster, then start it with --initial-cluster-state=existing.
	var addOut []byte
	for i := 0; ; i++ {
		if addOut, err = ctl(bootstrapEP, "member", "add", m.NodeName, "--peer-urls="+peerURL); err == nil {
			break
		}
		if i == 20 || ctx.Err() != nil {
			return fmt.Errorf("etcd stand-in on %s: %w", m.Node.Name, err)
		}
		time.Sleep(3 * time.Second)
	}
	initial := ""
	for _, l := range strings.Split(string(addOut), "\n") {
		if v, ok := strings.CutPrefix(l, "ETCD_INITIAL_CLUSTER="); ok {
			initial = strings.Trim(v, `"`)
		}
	}
	if initial == "" {
		return fmt.Errorf("etcd stand-in on %s: member add printed no ETCD_INITIAL_CLUSTER: %s", m.Node.Name, addOut)
	}
	m.Logf("etcd stand-in on %s: member %s added (%s)", m.Node.Name, m.NodeName, initial)
	if _, err := m.Node.Start("etcd-standin", nil, nil, m.Bins["etcd"],
		"--name="+m.NodeName, "--data-dir=/var/lib/etcd",
		"--initial-cluster="+initial, "--initial-cluster-state=existing",
		"--initial-advertise-peer-urls="+peerURL, "--advertise-client-urls=https://"+net.JoinHostPort(m.IP, "2379"),
		"--listen-client-urls=https://0.0.0.0:2379", "--listen-peer-urls=https://0.0.0.0:2380",
		"--listen-metrics-urls=http://0.0.0.0:"+strconv.Itoa(EtcdStandinHealthPort),
		"--cert-file="+cert("etcd-serving-"+m.NodeName+".crt"), "--key-file="+cert("etcd-serving-"+m.NodeName+".key"),
		"--peer-cert-file="+cert("etcd-peer-"+m.NodeName+".crt"), "--peer-key-file="+cert("etcd-peer-"+m.NodeName+".key"),
		"--trusted-ca-file="+ca, "--peer-trusted-ca-file="+ca, "--client-cert-auth=true", "--peer-client-cert-auth=true"); err != nil {
		return err
	}
	local := "https://127.0.0.1:2379"
	for i := 0; ; i++ {
		if _, err = ctl(local, "endpoint", "health"); err == nil {
			break
		}
		if i == 60 || ctx.Err() != nil {
			return fmt.Errorf("etcd stand-in on %s: member not healthy: %w", m.Node.Name, err)
		}
		time.Sleep(2 * time.Second)
	}
	m.Logf("etcd stand-in on %s: member healthy", m.Node.Name)
	if err := m.writeEtcdPod(ctx, staging); err != nil {
		return err
	}
	if m.BeforeAPIServer != nil {
		if err := m.BeforeAPIServer(ctx); err != nil {
			return err
		}
	}
	return m.startAPIServer(ctx)
}

// etcdStandinPodYAML is the static pod the stand-in writes for its member: what the kubelet
// publishes as the mirror pod openshift-etcd/etcd-<node> that cluster/etcd waits for (app=etcd,
// Ready). Its container is the pause image — the member itself runs outside the kubelet (the
// release's etcd image cannot be pulled) — and its readiness probe reads the real member's
// /health, so Ready means the member is healthy.
func etcdStandinPodYAML() string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: openshift-etcd
  labels: {app: etcd, k8s-app: etcd, etcd: "true", rehearsal-standin: "true"}
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  containers:
  - name: etcd
    image: ` + PauseImage + `
    imagePullPolicy: Never
    readinessProbe:
      httpGet: {path: /health, port: ` + strconv.Itoa(EtcdStandinHealthPort) + `, scheme: HTTP}
      periodSeconds: 5
      failureThreshold: 3
`
}

func (m *MasterStandins) writeEtcdPod(ctx context.Context, staging string) error {
	f := filepath.Join(staging, "etcd-pod.yaml")
	if err := os.WriteFile(f, []byte(etcdStandinPodYAML()), 0o644); err != nil {
		return err
	}
	return m.Node.Run(ctx, "standin-install", nil, "sh", "-c", "mkdir -p "+PodManifestDir+" && cp "+f+" "+PodManifestDir+"/etcd-pod.yaml")
}

// startAPIServer starts the master's control plane: its kube-apiserver (the
// kube-apiserver-operator's part), and its kube-controller-manager and kube-scheduler (the
// kube-controller-manager- and kube-scheduler-operators' part: after the pivot nothing else
// signs an approved CSR, so a worker joining in cluster/workers would get no certificate).
//
// What the operators hand their operands from the cluster is read from the cluster only
// (operators.go: ReadKASInputs, EnsureCSRSigner, ReadKCMInputs): the service-account keys,
// the client and kubelet CAs, the serving certificates minted from the handed-over signers,
// the CSR signer and the etcd client of the etcd stand-in. A missing object fails the stand-in
// with an error naming it, after the time an operator's retries would take to show Degraded.
// The rest of each command line (flags that are the operators' own configuration, not cluster
// inputs) and the files those flags name are the bootstrap's static pod's, copied to the same
// node paths: the front-proxy client and CA, the kube-apiserver's kubelet client certificate and
// the controller manager's root CA, which the real operators mint or assemble themselves.
// The controller manager and scheduler are restarted when they exit, as the kubelet restarts a
// static pod (they exit while the API is not ready yet).
func (m *MasterStandins) startAPIServer(ctx context.Context) error {
	pods, err := StaticPods(m.BootstrapRoot)
	if err != nil {
		return err
	}
	kasFiles, kasFlags, kasExtra, kcmFiles, kcmFlags, err := m.operatorInputs(ctx)
	if err != nil {
		return err
	}
	files := map[string][]byte{}
	for k, v := range kasFiles {
		files[k] = v
	}
	for k, v := range kcmFiles {
		files[k] = v
	}
	if err := m.install(ctx, "standin-operators", files); err != nil {
		return err
	}
	for _, prog := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		found := false
		for _, c := range pods {
			if c.Program != prog {
				continue
			}
			found = true
			var cp strings.Builder
			cp.WriteString("set -e\n")
			// Every volume, the same-path ones (kube-controller-manager's kubeconfigs) too.
			for _, hp := range c.HostPaths {
				fmt.Fprintf(&cp, "mkdir -p %q\ncp -a %q/. %q/\n", hp, filepath.Join(m.BootstrapRoot, hp), hp)
			}
			if err := m.Node.Run(ctx, "standin-install", nil, "sh", "-c", cp.String()); err != nil {
				return fmt.Errorf("%s stand-in on %s: %w", prog, m.Node.Name, err)
			}
			args := c.Args
			switch prog {
			case "kube-apiserver":
				args, err = replaceFlags(args, kasFlags, kasExtra...)
			case "kube-controller-manager":
				args, err = replaceFlags(args, kcmFlags)
			}
			if err != nil {
				return fmt.Errorf("%s stand-in on %s: %w", prog, m.Node.Name, err)
			}
			argv := append([]string{m.Bins[prog]}, args...)
			if prog == "kube-apiserver" {
				_, err = m.Node.Start(prog+"-standin", c.Env, c.Binds, argv...)
			} else {
				err = m.Node.Keep(prog+"-standin", c.Env, c.Binds, argv...)
			}
			if err != nil {
				return err
			}
			m.Logf("%s stand-in on %s: started with the operator's inputs read from the cluster", prog, m.Node.Name)
			break
		}
		if !found {
			return fmt.Errorf("%s stand-in: the bootstrap's static pods have no %s", prog, prog)
		}
	}
	// The operands' mirror pods and revisions, as the operators leave them (standin_pods.go).
	operands := standinPods
	if m.CVOPod {
		operands = append(slices.Clone(operands), cvoStandinPod)
	}
	if err := m.writeStandinPods(ctx, operands); err != nil {
		return err
	}
	k, err := m.Clients()
	if err != nil {
		return err
	}
	for _, o := range staticPodOperators {
		if err := ReportRevision(ctx, k.Dynamic, o.gvr, o.kind, m.NodeName); err != nil {
			return err
		}
	}
	m.Logf("stand-ins on %s: operand pods written, %s at revision 1 in kubeapiservers, kubeschedulers and kubecontrollermanagers", m.Node.Name, m.NodeName)
	return nil
}

// OperatorInputsTimeout bounds how long the masters' stand-ins wait for the objects the
// operators read: the objects are applied by cluster/bootstrap before any master joins, so a
// missing one after this long is missing for good.
var OperatorInputsTimeout = 90 * time.Second

// operatorInputs reads what the kube-apiserver- and kube-controller-manager-operators read,
// retrying until OperatorInputsTimeout, and returns the files and flags of both operands.
func (m *MasterStandins) operatorInputs(ctx context.Context) (kasFiles map[string][]byte, kasFlags map[string]string, kasExtra []string,
	kcmFiles map[string][]byte, kcmFlags map[string]string, err error) {
	deadline := time.Now().Add(OperatorInputsTimeout)
	for {
		var k *kube.Clients
		if k, err = m.Clients(); err == nil {
			if err = ensureOperatorObjects(ctx, k.Dynamic, m.Logf); err == nil {
				var kas KASInputs
				if kas, err = ReadKASInputs(ctx, k.Dynamic); err == nil {
					if kasFiles, kasFlags, kasExtra, err = kas.KASFiles(); err == nil {
						var kcm KCMInputs
						if kcm, err = ReadKCMInputs(ctx, k.Dynamic); err == nil {
							kcmFiles, kcmFlags = kcm.KCMFiles()
							return
						}
					}
				}
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, nil, nil, nil, nil, fmt.Errorf("control-plane stand-ins on %s: %w", m.Node.Name, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(3 * time.Second):
		}
	}
}

// ensureOperatorObjects is what the operators write before their operands read: the
// kube-controller-manager-operator's CSR signer chain and the kube-apiserver-operator's client
// signers and CA bundles.
func ensureOperatorObjects(ctx context.Context, dyn kube.Interface, logf func(string, ...any)) error {
	did, err := EnsureCSRSigner(ctx, dyn)
	if err != nil {
		return err
	}
	if did != "kept" {
		logf("kube-controller-manager-operator stand-in: csr-signer %s", did)
	}
	return EnsureKASClientSigners(ctx, dyn)
}

// install writes files (node path → content, 0600) into the master through its own mount
// namespace.
func (m *MasterStandins) install(ctx context.Context, what string, files map[string][]byte) error {
	staging := filepath.Join(filepath.Dir(m.Node.Root), what)
	var sh strings.Builder
	sh.WriteString("set -e\n")
	i := 0
	for p, b := range files {
		src := filepath.Join(staging, strconv.Itoa(i))
		i++
		if err := os.MkdirAll(staging, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(src, b, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(&sh, "mkdir -p %q\ncp %q %q\n", filepath.Dir(p), src, p)
	}
	return m.Node.Run(ctx, "standin-install", nil, "sh", "-c", sh.String())
}

// EtcdTeardownStandin is the cluster-etcd-operator's bootstrap teardown
// (cluster-etcd-operator release-4.18 pkg/operator/bootstrapteardown/
// bootstrap_teardown_controller.go BootstrapTeardownController: sync → removeBootstrap once
// library-go's IsBootstrapComplete sees ConfigMap kube-system/bootstrap status=complete): it
// reads only that ConfigMap and etcd's member list, and removes the etcd-bootstrap member
// through master's member (real etcdctl in the master node). Like the operator it does not ask
// whether the bootstrap's kube-apiserver still needs its member: a signal that comes too early
// takes the bootstrap API's storage away. It returns when the member is gone.
func EtcdTeardownStandin(ctx context.Context, master *Node, etcdctl string, clients func() (*kube.Clients, error), logf func(string, ...any)) error {
	ca := etcdBundleDir + "/server-ca-bundle.crt"
	run := func(args ...string) ([]byte, error) {
		argv := append([]string{etcdctl, "--endpoints=https://127.0.0.1:2379", "--cacert=" + ca, "--cert=" + etcdCertDir + "/etcd-client.crt",
			"--key=" + etcdCertDir + "/etcd-client.key", "--command-timeout=20s"}, args...)
		cmd, err := master.Command("etcdctl", []string{"ETCDCTL_API=3"}, nil, argv...)
		if err != nil {
			return nil, err
		}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("etcdctl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(errb.Bytes()))
		}
		return out.Bytes(), nil
	}
	for ctx.Err() == nil {
		done := false
		if k, err := clients(); err == nil {
			done, _ = kube.BootstrapComplete(ctx, k.Dynamic)
		}
		if done {
			out, err := run("member", "list", "-w", "json")
			if err == nil {
				var ml struct {
					Members []struct {
						ID       uint64   `json:"ID"`
						Name     string   `json:"name"`
						PeerURLs []string `json:"peerURLs"`
					} `json:"members"`
				}
				if err = json.Unmarshal(out, &ml); err == nil {
					found := false
					for _, mb := range ml.Members {
						if mb.Name == "etcd-bootstrap" {
							found = true
							if _, err = run("member", "remove", strconv.FormatUint(mb.ID, 16)); err == nil {
								logf("etcd teardown stand-in: removed member etcd-bootstrap (%x)", mb.ID)
							}
						}
					}
					if !found {
						return nil
					}
				}
			}
			if err != nil {
				logf("etcd teardown stand-in: %v", err)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(3 * time.Second):
		}
	}
	return ctx.Err()
}

// StandinOperators are the ClusterOperators the rehearsal's stand-ins report for: the
// operators whose work on the masters they do (etcd, kube-apiserver).
var StandinOperators = []string{"etcd", "kube-apiserver"}

// ReportOperator creates ClusterOperator name if missing and sets its status as an operator at
// its level does (Available=True, Progressing=False, Degraded=False, versions[operator]) when
// available, else Available=False with reason. A stand-in: the operators' images cannot run.
func ReportOperator(ctx context.Context, k *kube.Clients, name, version string, available bool, reason string) error {
	ri := k.Dynamic.Resource(kube.ClusterOperators)
	if _, err := ri.Get(ctx, name, kube.GetOptions{}); err != nil {
		o := &kube.Unstructured{Object: map[string]any{"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{}}}
		if _, err := ri.Create(ctx, o, kube.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
			return err
		}
	}
	st := func(b bool) string {
		if b {
			return "True"
		}
		return "False"
	}
	now := time.Now().UTC().Format(time.RFC3339)
	msg := "rehearsal stand-in: " + reason
	status := map[string]any{
		"conditions": []any{
			map[string]any{"type": "Available", "status": st(available), "lastTransitionTime": now, "reason": "RehearsalStandin", "message": msg},
			map[string]any{"type": "Progressing", "status": st(!available), "lastTransitionTime": now, "reason": "RehearsalStandin", "message": msg},
			map[string]any{"type": "Degraded", "status": "False", "lastTransitionTime": now, "reason": "RehearsalStandin"},
		},
		"versions": []any{map[string]any{"name": "operator", "version": version}},
	}
	_, err := kube.PatchStatus(ctx, ri, "config.openshift.io/v1", "ClusterOperator", name, status)
	return err
}

// ReportClusterVersion sets ClusterVersion version's status as the CVO does: Progressing while
// operators are not at their level, Available once they all are (history Completed).
func ReportClusterVersion(ctx context.Context, k *kube.Clients, version string, available bool, msg string) error {
	now := time.Now().UTC().Format(time.RFC3339)
	st, prog := "False", "True"
	state, completed := "Partial", any(nil)
	if available {
		st, prog, state, completed = "True", "False", "Completed", now
	}
	status := map[string]any{
		"desired":            map[string]any{"version": version, "image": "quay.io/openshift-release-dev/ocp-release@sha256:" + strings.Repeat("0", 64)},
		"observedGeneration": int64(1), "versionHash": "rehearsal-standin", "availableUpdates": nil,
		"history": []any{map[string]any{"state": state, "version": version, "image": "quay.io/openshift-release-dev/ocp-release@sha256:" + strings.Repeat("0", 64),
			"startedTime": now, "completionTime": completed, "verified": false}},
		"conditions": []any{
			map[string]any{"type": "Progressing", "status": prog, "lastTransitionTime": now, "message": "rehearsal CVO stand-in: " + msg},
			map[string]any{"type": "Available", "status": st, "lastTransitionTime": now, "message": "rehearsal CVO stand-in: " + msg},
			map[string]any{"type": "Failing", "status": "False", "lastTransitionTime": now},
		},
	}
	_, err := kube.PatchStatus(ctx, k.Dynamic.Resource(kube.ClusterVersions), "config.openshift.io/v1", "ClusterVersion", "version", status)
	return err
}

// SeedCRDs writes each CRD of crds (file name → YAML) into the bootstrap's etcd as OpenShift
// 4.18's 1.31 kube-apiserver would have stored it (key /registry/apiextensions.k8s.io/
// customresourcedefinitions/<name>, JSON, names accepted and Established), with real etcdctl in
// the bootstrap node and the bootstrap's own etcd client certificate. The rehearsal uses it for
//
//   - labbuild's CRDs whose x-kubernetes-validations call CEL131 functions (cel.go), which
//     kube-apiserver 1.30 refuses in a new CRD: cluster/bootstrap's apply of the same CRD is then
//     an update whose rules all pre-exist, which 1.30 compiles in its stored-expressions
//     environment (apiextensions validation findPreexistingExpressions). labbuild's apply is
//     unchanged and no rule is dropped: custom resources are validated with the IP rules too;
//   - the CVO stand-in's CRDs (CVOStandinCRDs), created as the CVO creates them from the payload.
//
// It returns the CRD names written.
func SeedCRDs(ctx context.Context, bootstrap *Node, etcdctl string, crds map[string][]byte) ([]string, error) {
	secrets := "/etc/kubernetes/bootstrap-secrets/"
	ctl := func(stdin []byte, args ...string) error {
		argv := append([]string{etcdctl, "--endpoints=https://127.0.0.1:2379", "--cacert=" + secrets + "etcd-ca.crt",
			"--cert=" + secrets + "etcd-client.crt", "--key=" + secrets + "etcd-client.key", "--command-timeout=20s"}, args...)
		cmd, err := bootstrap.Command("etcdctl", []string{"ETCDCTL_API=3"}, nil, argv...)
		if err != nil {
			return err
		}
		var out bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("etcdctl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
		}
		return nil
	}
	for i := 0; ; i++ {
		err := ctl(nil, "endpoint", "health")
		if err == nil {
			break
		}
		if i == 90 || ctx.Err() != nil {
			return nil, fmt.Errorf("CRD stand-in: bootstrap etcd not healthy: %w", err)
		}
		time.Sleep(2 * time.Second)
	}
	var names []string
	files := make([]string, 0, len(crds))
	for f := range crds {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		b := crds[f]
		var crd map[string]any
		if err := sigsyaml.Unmarshal(b, &crd); err != nil {
			return nil, fmt.Errorf("CRD stand-in: %s: %w", f, err)
		}
		md, _ := crd["metadata"].(map[string]any)
		spec, _ := crd["spec"].(map[string]any)
		name, _ := md["name"].(string)
		if name == "" || spec == nil {
			return nil, fmt.Errorf("CRD stand-in: %s: no metadata.name or spec", f)
		}
		md["uid"] = newUID()
		md["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
		md["generation"] = 1
		var stored []string
		vs, _ := spec["versions"].([]any)
		for _, v := range vs {
			if vm, _ := v.(map[string]any); vm["storage"] == true {
				stored = append(stored, vm["name"].(string))
			}
		}
		// Stored as the 1.31 apiserver's naming and establishing controllers leave it.
		now := time.Now().UTC().Format(time.RFC3339)
		crd["status"] = map[string]any{"storedVersions": stored, "acceptedNames": spec["names"], "conditions": []any{
			map[string]any{"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
			map[string]any{"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
		}}
		js, err := json.Marshal(crd)
		if err != nil {
			return nil, err
		}
		if err := ctl(js, "put", "/registry/apiextensions.k8s.io/customresourcedefinitions/"+name); err != nil {
			return nil, fmt.Errorf("CRD stand-in: %s: %w", name, err)
		}
		names = append(names, name)
	}
	return names, nil
}

// newUID is a random (version 4) UUID, as the apiserver gives a new object.
func newUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
