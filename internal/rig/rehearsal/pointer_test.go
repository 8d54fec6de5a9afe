package rehearsal

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"github.com/labbuild/labbuild/render/releases"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_4/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"libvirt.org/go/libvirtxml"

	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/render/mco"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
)

// TestPointerConfigResolves: the MCO's pointer config names only the server and its CA; Ignition
// (ResolvePointer) fetches the server's config over HTTPS trusting that CA alone, sends the
// Ignition Accept header, and merges it; a server whose certificate that CA did not sign is
// refused; a config with no merge is unchanged.
func TestPointerConfigResolves(t *testing.T) {
	var accept string
	served := ignition.New()
	src, _ := ignition.Source([]byte("worker-0 served\n"))
	served.Storage.Files = append(served.Storage.Files, ignitionFile("/etc/served", src))
	body, _ := ignition.Encode(served)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/config/worker" {
			http.NotFound(w, r)
			return
		}
		accept = r.Header.Get("Accept")
		w.Write(body)
	}))
	defer srv.Close()
	ca := pemOf(srv.Certificate().Raw)
	host := strings.TrimPrefix(srv.URL, "https://")
	ptr, err := PointerConfig(host, "worker", ca)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(ptr), "hostname") || !strings.Contains(string(ptr), `"source":"https://`+host+`/config/worker"`) {
		t.Errorf("pointer config: %s", ptr)
	}
	dial := (&net.Dialer{}).DialContext
	out, merged, err := ResolvePointer(context.Background(), ptr, dial)
	if err != nil || !merged {
		t.Fatalf("resolve: merged %v, %v", merged, err)
	}
	cfg, err := ignition.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := ignition.FileContents(cfg, "/etc/served"); err != nil || string(b) != "worker-0 served\n" {
		t.Errorf("merged config's /etc/served: %q %v", b, err)
	}
	if len(cfg.Ignition.Config.Merge) != 0 || !strings.HasPrefix(accept, "application/vnd.coreos.ignition+json;version=3.4.0") {
		t.Errorf("merge left %v; Accept %q", cfg.Ignition.Config.Merge, accept)
	}
	// Another CA: the server is not trusted.
	otherCA, _ := opCA(t, "another-root")
	bad, _ := PointerConfig(host, "worker", otherCA)
	if _, _, err := ResolvePointer(context.Background(), bad, dial); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a pointer trusting another CA: %v, want a certificate error", err)
	}
	plain, _ := ignition.Encode(ignition.New())
	if got, merged, err := ResolvePointer(context.Background(), plain, dial); err != nil || merged || string(got) != string(plain) {
		t.Errorf("no merge: %q %v %v", got, merged, err)
	}
}

// TestDHCPLease: the lease is the reservation of the MAC, with the network's gateway, prefix,
// DNS and domain; an unreserved MAC is an error.
func TestDHCPLease(t *testing.T) {
	n := &libvirtxml.Network{Name: "lab", Domain: &libvirtxml.NetworkDomain{Name: "lab.example.test"},
		IPs: []libvirtxml.NetworkIP{{Address: "198.18.0.1", Prefix: 24, DHCP: &libvirtxml.NetworkDHCP{
			Hosts: []libvirtxml.NetworkDHCPHost{{MAC: "52:54:00:aa:bb:01", Name: "worker-0", IP: "198.18.0.110"}}}}}}
	k, name, err := DHCPLease(n, "52:54:00:AA:BB:01")
	if err != nil || name != "worker-0" || k.IP != "198.18.0.110" || k.Prefix != 24 || k.Gateway != "198.18.0.1" ||
		strings.Join(k.DNS, ",") != "198.18.0.1" || strings.Join(k.Search, ",") != "lab.example.test" {
		t.Errorf("lease %+v %q %v", k, name, err)
	}
	if _, _, err := DHCPLease(n, "52:54:00:aa:bb:02"); err == nil {
		t.Error("an unreserved MAC got a lease")
	}
}

// TestMCOImagesRoundTrip: for each release, the CVO stand-in's images ConfigMaps give the MCO
// stand-in an image-references the operator's bootstrap of that release accepts (every
// required tag: 4.22's docker-registry too), with the payload's pull specs, the release's node
// OS tag (OKD's stream-coreos) and version.
func TestMCOImagesRoundTrip(t *testing.T) {
	spec := func(tag string) string {
		return "registry.example.test/ocp/art-dev@sha256:" + strings.Repeat("0", 63) + string(rune('a'+len(tag)%6))
	}
	for _, tc := range []struct{ release, version, osTag string }{
		{"4.18", "4.18.0", "rhel-coreos"},
		{"4.20", "4.20.0", "rhel-coreos"},
		{"4.22", "4.22.0", "rhel-coreos"},
		{"okd-4.22", "4.22.0-okd-scos.1", "stream-coreos"},
	} {
		t.Run(tc.release, func(t *testing.T) {
			rel, ok := releases.Named(tc.release)
			if !ok {
				t.Fatalf("no release row %s", tc.release)
			}
			files, err := MCOImagesConfigMaps(tc.version, rel, spec)
			if err != nil {
				t.Fatal(err)
			}
			var images map[string]string
			var cm struct{ Data map[string]string }
			json.Unmarshal(files["0000_80_machine-config_02_images.configmap.yaml"], &cm)
			if err := json.Unmarshal([]byte(cm.Data["images.json"]), &images); err != nil {
				t.Fatal(err)
			}
			var osurl struct{ Data map[string]string }
			json.Unmarshal(files["0000_80_machine-config_05_osimageurl.yaml"], &osurl)
			if osurl.Data["baseOSContainerImage"] != spec(tc.osTag) || osurl.Data["baseOSExtensionsContainerImage"] != spec(tc.osTag+"-extensions") {
				t.Errorf("osimageurl %v, want the pull specs of %s and %s-extensions", osurl.Data, tc.osTag, tc.osTag)
			}
			refs, err := mcoImageReferences(images, map[string][]byte{"baseOSContainerImage": []byte(osurl.Data["baseOSContainerImage"]),
				"baseOSExtensionsContainerImage": []byte(osurl.Data["baseOSExtensionsContainerImage"])}, rel)
			if err != nil {
				t.Fatal(err)
			}
			if err := mco.CheckImageReferences(refs, rel.MCORequiredTags); err != nil {
				t.Error(err)
			}
			if images["releaseVersion"] != tc.version || !strings.Contains(string(refs), `"name":"`+tc.osTag+`"`) {
				t.Errorf("images %v; refs %s", images, refs)
			}
		})
	}
}

// TestReportRevision: a node's status enters the operator resource bare, then at revision 1
// (two writes, as the CRD requires); the resource is created when missing; a second master
// adds its own entry.
func TestReportRevision(t *testing.T) {
	gvr := staticPodOperators[0].gvr
	sch := runtime.NewScheme()
	d := dynfake.NewSimpleDynamicClientWithCustomListKinds(sch, map[schema.GroupVersionResource]string{
		{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource}: "KubeAPIServerList"})
	dyn := kubedyn.Wrap(d)
	ctx := context.Background()
	for _, n := range []string{"master-0.x", "master-1.x"} {
		if err := ReportRevision(ctx, dyn, gvr, "KubeAPIServer", n); err != nil {
			t.Fatal(err)
		}
	}
	o, err := dyn.Resource(gvr).Get(ctx, "cluster", kube.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(o.Object["status"])
	if string(b) != `{"nodeStatuses":[{"currentRevision":1,"nodeName":"master-0.x"},{"currentRevision":1,"nodeName":"master-1.x"}]}` {
		t.Errorf("status %s", b)
	}
	// The operand pods parse as the kubelet reads them, each a pause container.
	root := t.TempDir()
	writePods(t, root, append(standinPods, cvoStandinPod))
	cs, err := StaticPods(root)
	if err != nil || len(cs) != 4 {
		t.Fatalf("operand pods: %d containers, %v", len(cs), err)
	}
}

func ignitionFile(path, src string) types.File {
	f := types.File{Node: types.Node{Path: path}}
	f.Contents.Source = &src
	return f
}

func pemOf(der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}) }

func writePods(t *testing.T, root string, pods []standinPod) {
	t.Helper()
	dir := filepath.Join(root, PodManifestDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if err := os.WriteFile(filepath.Join(dir, p.file), []byte(p.yaml()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIronicMediaTLS: Ironic's media server presents a certificate for localhost (no
// provisioning IP) from its own metal3-ironic CA: a client verifying with the system roots
// refuses it, as a BMC that verified media URLs would; one that does not verify, as BMCs do,
// reads the media.
func TestIronicMediaTLS(t *testing.T) {
	tc, err := IronicMediaTLS("")
	if err != nil {
		t.Fatal(err)
	}
	leaf := tc.Certificates[0]
	if len(leaf.Certificate) != 2 {
		t.Fatalf("chain of %d certificates, want the server's and its CA", len(leaf.Certificate))
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("iso")) }))
	srv.TLS = tc
	srv.StartTLS()
	defer srv.Close()
	if _, err := (&http.Client{}).Get(srv.URL); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a verifying client: %v, want a certificate error", err)
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := insecure.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cert, _ := x509.ParseCertificate(leaf.Certificate[0])
	ca, _ := x509.ParseCertificate(leaf.Certificate[1])
	if cert.Subject.CommonName != "localhost" || ca.Subject.CommonName != "metal3-ironic" || !ca.IsCA {
		t.Errorf("server %q from %q (CA %v)", cert.Subject.CommonName, ca.Subject.CommonName, ca.IsCA)
	}
}

// TestMCSCABundle: the MCO reads the machine-config-server CA bundle from the handed-over
// ConfigMap, and only when that ConfigMap does not exist from kube-system/root-ca
// (getMCSCABundle); a ConfigMap without ca-bundle.crt is an error naming it.
func TestMCSCABundle(t *testing.T) {
	cm := func(ns, name, key, val string) runtime.Object {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"namespace": ns, "name": name}, "data": map[string]any{key: val}}}
	}
	root := cm("kube-system", "root-ca", "ca.crt", "ROOT")
	for _, tc := range []struct {
		name       string
		objs       []runtime.Object
		want       string
		handedOver bool
		err        string
	}{
		{"handed over", []runtime.Object{root, cm(MCONamespace, "machine-config-server-ca", "ca-bundle.crt", "MCSCA")}, "MCSCA", true, ""},
		{"not handed over", []runtime.Object{root}, "ROOT", false, ""},
		{"no ca-bundle.crt", []runtime.Object{root, cm(MCONamespace, "machine-config-server-ca", "other", "x")}, "", false, "machine-config-server-ca[ca-bundle.crt]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := kubedyn.Wrap(dynfake.NewSimpleDynamicClient(runtime.NewScheme(), tc.objs...))
			got, handed, err := MCSCABundle(context.Background(), dyn)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want || handed != tc.handedOver {
				t.Errorf("MCSCABundle = %q, %v, %v; want %q, %v", got, handed, err, tc.want, tc.handedOver)
			}
		})
	}
}
