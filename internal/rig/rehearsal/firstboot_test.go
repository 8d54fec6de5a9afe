package rehearsal

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coreos/ignition/v2/config/v3_4/types"

	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/render/releases"
	"github.com/labbuild/labbuild/targets/kube"
)

// The machine-config daemon's first boot in a flow (firstboot.go, mcoincluster.go): the CVO
// stand-in applies the MCO's images ConfigMaps, the in-cluster MCO stand-in renders from the
// cluster and creates rendered-<pool>-<hash>; after cluster/done each kubelet node's first-boot
// disk is checked against the MachineConfig its node-annotations.json names, read from the
// cluster.

// mcoStandin is the in-cluster MCO stand-in of the rig's lab: the release's programs and
// templates as labbuild's release/mco extracted them.
func (r *rig) mcoStandin() *MCOInCluster {
	rel := filepath.Join(r.lab, "out", "release", "mco")
	return &MCOInCluster{Operator: filepath.Join(rel, "bin", "machine-config-operator"), Controller: filepath.Join(rel, "bin", "machine-config-controller"),
		Templates: filepath.Join(rel, "templates"), Work: filepath.Join(r.work, "mco-incluster"), Release: r.releaseRow()}
}

// releaseRow is the render/releases row of the rig's payload.
func (r *rig) releaseRow() releases.Release {
	row, _ := releases.Named(r.payload.Release.Name)
	return row
}

// applyMCOImages is the CVO stand-in's apply of the MCO's images ConfigMaps (MCOImagesConfigMaps)
// with the lab payload's pull specs; the namespace must exist (applyMCONamespaces).
func applyMCOImages(ctx context.Context, r *rig, k *kube.Clients) error {
	files, err := MCOImagesConfigMaps(r.payload.Version, r.releaseRow(), r.payload.Pullspec)
	if err != nil {
		return err
	}
	return applyFiles(ctx, k, files)
}

// applyFiles applies files (name → manifest) to the cluster as the CVO stand-in does:
// kube.Applier's order, its output discarded.
func applyFiles(ctx context.Context, k *kube.Clients, files map[string][]byte) error {
	ap, err := kube.NewApplier(k.Config, io.Discard)
	if err != nil {
		return err
	}
	_, err = ap.ApplyFiles(ctx, files)
	return err
}

// mcoRender is one in-cluster render: the pools' rendered names, and when it began reading
// the cluster.
type mcoRender struct {
	Names MCORendered
	Began time.Time
}

// runMCOStandin renders in the cluster every 10 s until a render succeeds (the inputs appear
// as cluster/bootstrap and the CVO stand-in apply them), then every 20 s, as the real render
// and container-runtime-config controllers re-render when their inputs change: a first render
// that ran before an input was served (an ImageDigestMirrorSet whose CRD was not yet
// established lists as none) named another rendered config than the bootstrap's, and nothing
// corrected it (TestRehearsalMirrorFlow at load 45: "rendered-master-… not found"). Each render
// replaces an unread one on latest.
func runMCOStandin(ctx context.Context, r *rig, fl *flowLog, latest chan mcoRender) {
	m := r.mcoStandin()
	var last string
	var prev MCORendered
	for ctx.Err() == nil {
		wait := 10 * time.Second
		if k, err := r.clients(); err == nil {
			began := time.Now()
			got, err := m.Render(ctx, k.Dynamic)
			if err == nil {
				if !maps.Equal(got, prev) {
					fl.logf("MCO stand-in (in cluster): rendered %v from the cluster's objects", got)
					if prev == nil {
						go syncKubeconfigData(ctx, r, fl)
					}
					prev = got
				}
				select {
				case <-latest:
				default:
				}
				latest <- mcoRender{Names: got, Began: began}
				wait = 20 * time.Second
			} else if s := err.Error(); s != last {
				fl.logf("MCO stand-in (in cluster): %v", lastLine(s))
				last = s
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// syncKubeconfigData keeps the machine-config-server's kubeconfig CA (SyncKubeconfigData) as the
// operator's sync loop does, every 20 s until ctx ends.
func syncKubeconfigData(ctx context.Context, r *rig, fl *flowLog) {
	var last string
	for ctx.Err() == nil {
		if k, err := r.clients(); err == nil {
			err := SyncKubeconfigData(ctx, k.Dynamic)
			if s := fmt.Sprint(err); s != last {
				fl.logf("MCO stand-in (in cluster): kubeconfig-data: %v", err)
				last = s
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Second):
		}
	}
}

// checkFirstBoot is the daemon's first run on each kubelet node of nodes: the MachineConfig its
// first-boot disk's node-annotations.json names, read from the cluster (as getStateAndConfigs
// does), and render/ignition.FirstBoot over that disk. It returns one verdict per node.
func checkFirstBoot(ctx context.Context, r *rig, nodes []string) map[string]error {
	out := map[string]error{}
	k, err := r.clients()
	for _, n := range nodes {
		if err != nil {
			out[n] = err
			continue
		}
		out[n] = firstBootOn(ctx, k.Dynamic, filepath.Join(r.work, "nodes", n, "root"+FirstBootSuffix))
	}
	return out
}

// firstBootOn is checkFirstBoot for one node's first-boot disk root.
func firstBootOn(ctx context.Context, dyn kube.Interface, root string) error {
	name, err := CurrentConfig(root)
	if err != nil {
		return err
	}
	o, err := dyn.Resource(machineConfigs).Get(ctx, name, kube.GetOptions{})
	if err != nil {
		// getStateAndConfigs → mcLister.Get: the daemon cannot start its first run.
		return fmt.Errorf("getStateAndConfigs: machineconfig %s: %w (stall 7: the in-cluster render must give the bootstrap's name)", name, err)
	}
	b, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	mc, err := ignition.ParseMachineConfig(b)
	if err != nil {
		return err
	}
	disk, err := DiskIgnition(root, mc.Config)
	if err != nil {
		return err
	}
	return ignition.FirstBoot(disk, mc)
}

// TestDiskIgnition: a config placed on a root (Place) and read back by DiskIgnition at the
// paths a MachineConfig names gives each file's bytes and mode, the masked unit as a link to
// /dev/null, the enabled unit enabled, and nothing for a path not on the disk; the daemon's
// check (render/ignition FirstBoot) accepts the disk against the config that laid it and names
// the file whose bytes changed on the disk afterwards.
func TestDiskIgnition(t *testing.T) {
	str := func(s string) *string { return &s }
	on, mode := true, 0o600
	cfg := ignition.New()
	src, _ := ignition.Source([]byte(`{"auths":{}}` + "\n"))
	anno, _ := ignition.Source([]byte(`{"machineconfiguration.openshift.io/currentConfig":"rendered-master-x"}`))
	cfg.Storage.Files = []types.File{
		{Node: types.Node{Path: "/var/lib/kubelet/config.json"}, FileEmbedded1: types.FileEmbedded1{Mode: &mode, Contents: types.Resource{Source: &src}}},
		{Node: types.Node{Path: ignition.PathNodeAnnotations}, FileEmbedded1: types.FileEmbedded1{Contents: types.Resource{Source: &anno}}},
	}
	cfg.Systemd.Units = []types.Unit{
		{Name: "kubelet.service", Enabled: &on, Contents: str("[Service]\nExecStart=/usr/bin/kubelet\n[Install]\nWantedBy=multi-user.target\n"),
			Dropins: []types.Dropin{{Name: "10-x.conf", Contents: str("[Service]\nEnvironment=X=1\n")}}},
		{Name: "masked.service", Mask: &on, Contents: str("[Service]\n")},
	}
	raw, err := ignition.Encode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if _, err := Place(raw, root); err != nil {
		t.Fatal(err)
	}
	mc := cfg
	mc.Storage.Files = append(mc.Storage.Files, types.File{Node: types.Node{Path: "/etc/absent"}})
	disk, err := DiskIgnition(root, mc)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]types.File{}
	for _, f := range disk.Storage.Files {
		files[f.Path] = f
	}
	if f, ok := files["/var/lib/kubelet/config.json"]; !ok || *f.Mode != 0o600 {
		t.Errorf("config.json: %+v", f)
	} else if b, _ := ignition.DecodeSource(*f.Contents.Source, f.Contents.Compression); string(b) != `{"auths":{}}`+"\n" {
		t.Errorf("config.json bytes %q", b)
	}
	if _, ok := files["/etc/absent"]; ok {
		t.Errorf("a path not on the disk is in its description")
	}
	if f, ok := files["/etc/systemd/system/kubelet.service.d/10-x.conf"]; !ok || *f.Mode != 0o644 {
		t.Errorf("drop-in: %+v", f)
	}
	if len(disk.Storage.Links) != 1 || disk.Storage.Links[0].Path != "/etc/systemd/system/masked.service" || *disk.Storage.Links[0].Target != "/dev/null" {
		t.Errorf("links %+v, want the masked unit to /dev/null", disk.Storage.Links)
	}
	if len(disk.Systemd.Units) != 1 || disk.Systemd.Units[0].Name != "kubelet.service" || !*disk.Systemd.Units[0].Enabled {
		t.Errorf("units %+v, want kubelet.service enabled (Ignition's preset)", disk.Systemd.Units)
	}
	rmc := &ignition.RenderedMachineConfig{Name: "rendered-master-x", Config: cfg}
	if err := ignition.FirstBoot(disk, rmc); err != nil {
		t.Errorf("the disk the config laid, against that config: %v", err)
	}
	// The disk changes by one byte: the daemon names the file.
	if err := os.WriteFile(filepath.Join(root, "var/lib/kubelet/config.json"), []byte(`{"auths":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	disk, err = DiskIgnition(root, mc)
	if err != nil {
		t.Fatal(err)
	}
	if err := ignition.FirstBoot(disk, rmc); err == nil || !strings.Contains(err.Error(), `content mismatch for file "/var/lib/kubelet/config.json"`) {
		t.Errorf("one byte less on the disk: %v, want the daemon's content mismatch", err)
	}
}

// checkMCSCA: past the pivot, a lab of a release whose MCO owns the machine-config-server CA
// (render/releases MCSCA, 4.19+) trusts the CA labbuild handed over, as the MCO reads it. The
// bundle the operator reads (MCSCABundle, getMCSCABundle) is the handed-over ConfigMap
// machine-config-server-ca, not the kube-system/root-ca fallback; it holds the certificate of
// Secret machine-config-server-ca (the signer the MCO's certrotation keeps rather than minting a
// new one); and the pointer config the operator makes from it (PointerConfig with that bundle,
// syncRenderConfig) verifies, as Ignition does on a node fetching its config, the serving
// certificate of Secret machine-config-server-tls for the host the pointer names (api-int at
// port 22623, getIgnitionHost). It returns what it checked.
func checkMCSCA(ctx context.Context, k *kube.Clients) (string, error) {
	bundle, handedOver, err := MCSCABundle(ctx, k.Dynamic)
	if err != nil {
		return "", err
	}
	if !handedOver {
		return "", fmt.Errorf("configmap %s/machine-config-server-ca is missing: the MCO falls back to kube-system/root-ca", MCONamespace)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return "", fmt.Errorf("configmap %s/machine-config-server-ca[ca-bundle.crt] holds no certificate", MCONamespace)
	}
	ca, err := objectData(ctx, k.Dynamic, secrets, MCONamespace, "machine-config-server-ca", "machine-config-operator pkg/controller/certrotation", "tls.crt", "tls.key")
	if err != nil {
		return "", err
	}
	if !bytes.Contains(bundle, bytes.TrimSpace(ca["tls.crt"])) {
		return "", fmt.Errorf("secret %s/machine-config-server-ca's certificate is not in the bundle the MCO reads", MCONamespace)
	}
	tls, err := objectData(ctx, k.Dynamic, secrets, MCONamespace, "machine-config-server-tls", "machine-config-server (its DaemonSet mounts it)", "tls.crt")
	if err != nil {
		return "", err
	}
	infra, err := k.Dynamic.Resource(configGVR("infrastructures")).Get(ctx, "cluster", kube.GetOptions{})
	if err != nil {
		return "", err
	}
	host, err := ignitionHost(infra.Object)
	if err != nil {
		return "", err
	}
	ptr, err := PointerConfig(host, "worker", bundle)
	if err != nil {
		return "", err
	}
	var cfg struct {
		Ignition struct {
			Security struct {
				TLS struct {
					CertificateAuthorities []struct{ Source string } `json:"certificateAuthorities"`
				} `json:"tls"`
			} `json:"security"`
		} `json:"ignition"`
	}
	if err := json.Unmarshal(ptr, &cfg); err != nil {
		return "", err
	}
	trusted := x509.NewCertPool()
	for _, c := range cfg.Ignition.Security.TLS.CertificateAuthorities {
		d, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(c.Source, "data:text/plain;charset=utf-8;base64,"))
		if err != nil {
			return "", fmt.Errorf("pointer config CA %q: %w", c.Source, err)
		}
		trusted.AppendCertsFromPEM(d)
	}
	blk, _ := pem.Decode(tls["tls.crt"])
	if blk == nil {
		return "", fmt.Errorf("secret %s/machine-config-server-tls[tls.crt] is not PEM", MCONamespace)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "", err
	}
	name, _, _ := net.SplitHostPort(host)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: trusted, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return "", fmt.Errorf("a node booting from the pointer config (https://%s) does not trust the machine-config-server: %w", host, err)
	}
	return fmt.Sprintf("the MCO reads the handed-over machine-config-server-ca (%d bytes), which holds the signer Secret's certificate; its pointer config (https://%s) verifies machine-config-server-tls for %s", len(bundle), host, name), nil
}
