package gather_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/labbuild/labbuild/internal/gather"
	"github.com/labbuild/labbuild/internal/nodessh"
	"github.com/labbuild/labbuild/internal/rig/rehearsal"
	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// TestGatherWithholdsSecretsAndNamesUnreachable runs the collector through Debian's sshd and
// sudo on a node whose /var/log and /opt/openshift hold secrets planted where a careless
// program might leave them (a private key, the pull secret's auth, the kubeadmin password),
// next to an ordinary log: the bundle has the ordinary files and the network facts, withholds
// every secret (listed in summary.txt), and names a second node that does not answer as not
// gathered without failing the bundle.
func TestGatherWithholdsSecretsAndNamesUnreachable(t *testing.T) {
	sshd := testenv.RequireSSHD(t)
	testenv.Require(t, "tar")
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "id")
	ign := rehearsal.CoreIgnition(testenv.SSHKeyPair(t, keyFile))
	privPEM, _ := os.ReadFile(keyFile)
	const auth = "c2FtcGxlOm5vdC1hLXNlY3JldA=="
	const kubeadmin = "Xq7eR-kP2mZ-aa9Tt-Lw3Yb"
	otherKey := []byte("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI...\n-----END EC PRIVATE KEY-----\n") // any private key, not only the user's
	seq := os.Getpid() % 10000
	sn, err := rehearsal.StartSSHNode("bootstrap", fmt.Sprintf("lbg%d-lab", seq), fmt.Sprintf("lbg%d-b", seq), "198.18.8.10", "198.18.8.1",
		filepath.Join(dir, "node"), sshd, ign, map[string][]byte{
			"/var/log/labbuild-test/ordinary.log":          []byte("kube-apiserver started\n"),
			"/var/log/labbuild-test/leaked-key.log":        append([]byte("debug dump:\n"), otherKey...),
			"/var/log/labbuild-test/leaked-auth.log":       []byte(`{"auths":{"quay.io":{"auth":"` + auth + `"}}}`),
			"/var/log/labbuild-test/leaked-password.log":   []byte("kubeadmin password " + kubeadmin + "\n"),
			"/opt/openshift/manifests/cluster-config.yaml": []byte("kind: ConfigMap\n"),
			"/opt/openshift/auth/kubeconfig":               []byte("apiVersion: v1\nkind: Config\n"),
		})
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Stop()
	t.Setenv("SSH_AUTH_SOCK", "")
	kh := filepath.Join(dir, "known_hosts")
	node := func(name, ip string) gather.Node {
		return gather.Node{Name: name, Role: "bootstrap", Dial: func(ctx context.Context) (*ssh.Client, error) {
			return nodessh.Dial(ctx, nodessh.Config{Node: name, Addr: ip + ":22", KeyFiles: []string{keyFile}, KnownHosts: kh,
				Dial: rehearsal.DialIn(sn.LabNS), Timeout: 3 * time.Second})
		}}
	}
	down := node("master-0", "198.18.8.11") // no such node on the bridge
	down.Role = "master"
	var progress bytes.Buffer
	res, err := gather.Gather(context.Background(), gather.Options{
		Dir: filepath.Join(dir, "out", "gather"), Now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC),
		Nodes:   []gather.Node{node("bootstrap", sn.IP), down},
		Files:   map[string][]byte{"labbuild/status.json": []byte("{}\n")},
		Secrets: [][]byte{privPEM, []byte(auth), []byte(kubeadmin)}, Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("progress:\n%s", progress.String())
	if want := filepath.Join(dir, "out", "gather", "20261126-120000.tar.gz"); res.Path != want {
		t.Errorf("bundle %s, want %s", res.Path, want)
	}
	files := map[string][]byte{}
	f, err := os.Open(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h.Name, "labbuild-gather-20261126-120000/") {
			t.Errorf("entry %s outside the bundle's top directory", h.Name)
		}
		b, _ := io.ReadAll(tr)
		files[strings.TrimPrefix(h.Name, "labbuild-gather-20261126-120000/")] = b
	}
	f.Close()
	for _, p := range []string{"bootstrap/var/log/labbuild-test/ordinary.log", "bootstrap/network/ip-addr.txt", "bootstrap/network/hostname.txt",
		"bootstrap/rendered-assets/openshift/manifests/cluster-config.yaml", "labbuild/status.json", "summary.txt"} {
		if _, ok := files[p]; !ok {
			t.Errorf("bundle lacks %s", p)
		}
	}
	if !bytes.Contains(files["bootstrap/network/ip-addr.txt"], []byte("198.18.8.10")) {
		t.Errorf("network facts lack the node's address:\n%s", files["bootstrap/network/ip-addr.txt"])
	}
	for p, b := range files {
		for _, s := range [][]byte{[]byte("PRIVATE KEY"), []byte(auth), []byte(kubeadmin)} {
			if bytes.Contains(b, s) {
				t.Errorf("bundle file %s holds a secret (%.12s…)", p, s)
			}
		}
		if strings.Contains(p, "auth/kubeconfig") {
			t.Errorf("bundle holds %s (the rendered assets' kubeconfig)", p)
		}
	}
	sum := string(files["summary.txt"])
	for _, w := range []string{
		"gathered     bootstrap", "NOT gathered master-0     master    master-0: dial tcp 198.18.8.11:22",
		"bootstrap/var/log/labbuild-test/leaked-key.log: holds a private key",
		"bootstrap/var/log/labbuild-test/leaked-auth.log: holds a secret",
		"bootstrap/var/log/labbuild-test/leaked-password.log: holds a secret",
	} {
		if !strings.Contains(sum, w) {
			t.Errorf("summary.txt lacks %q:\n%s", w, sum)
		}
	}
	if !strings.Contains(progress.String(), "gather: bootstrap: ") || !strings.Contains(progress.String(), "gather: master-0: NOT gathered: ") {
		t.Errorf("progress lines:\n%s", progress.String())
	}
	if st, _ := os.Stat(res.Path); st.Mode().Perm() != 0o600 {
		t.Errorf("bundle mode %v, want 0600", st.Mode().Perm())
	}
}
