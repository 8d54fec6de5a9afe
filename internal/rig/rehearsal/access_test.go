package rehearsal

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readBundle returns the files of a gather bundle by their path below its top directory.
func readBundle(t *testing.T, p string) map[string][]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		_, rest, _ := strings.Cut(h.Name, "/")
		out[rest] = b
	}
	return out
}

var wroteBundle = regexp.MustCompile(`labbuild: wrote (\S+\.tar\.gz)`)

// gatherBundle runs labbuild gather and returns its output and the bundle's files.
func (r *rig) gatherBundle(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	out, err := r.labbuild("gather")
	if err != nil {
		t.Fatalf("labbuild gather: %v\n%s", err, out)
	}
	m := wroteBundle.FindSubmatch(out)
	if m == nil {
		t.Fatalf("labbuild gather named no bundle:\n%s", out)
	}
	p := string(m[1])
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.lab, p)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("bundle %s: %v, mode %v; want 0600", p, err, st.Mode().Perm())
	}
	return string(out), readBundle(t, p)
}

// checkSSHAndGather is issue 27's must-show on a running rehearsal (bootstrap with its static
// pods, master-0 with its kubelet), each node with Debian's sshd and the core user its Ignition
// gives: labbuild ssh master-0 -- hostname prints the node's name; labbuild gather's bundle
// holds the bootstrap's static-pod logs and master-0's kubelet log, its network facts and
// labbuild's status, and no secret; with master-0 stopped, gather still finishes and names it.
func checkSSHAndGather(t *testing.T, r *rig) {
	hn, err := os.ReadFile(filepath.Join(r.work, "nodes", "master-0", "root", "etc", "hostname"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.labbuild("ssh", "master-0", "--", "hostname")
	if err != nil {
		t.Fatalf("labbuild ssh master-0 -- hostname: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(strings.TrimSpace(string(hn))) + `$`).Match(out) {
		t.Errorf("labbuild ssh master-0 -- hostname printed %q, want the node's name %q", out, bytes.TrimSpace(hn))
	}
	if !strings.Contains(string(out), "recorded master-0's host key") {
		t.Errorf("first ssh to master-0 did not say it recorded the host key:\n%s", out)
	}
	kh := filepath.Join(r.lab, "out", ".labbuild", "known_hosts")
	if st, err := os.Stat(kh); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("known_hosts %s: %v (want 0600)", kh, err)
	}

	log, files := r.gatherBundle(t)
	t.Logf("gather:\n%s", log)
	for _, want := range []string{"gather: bootstrap: ", "gather: master-0: "} {
		if !strings.Contains(log, want) {
			t.Errorf("no progress line %q", want)
		}
	}
	var podLogs []string
	for p, b := range files {
		if strings.HasPrefix(p, "bootstrap/var/log/rehearsal/") && strings.Contains(p, "kube-apiserver") && len(b) > 0 {
			podLogs = append(podLogs, p)
		}
	}
	if len(podLogs) == 0 {
		t.Errorf("no bootstrap static-pod log (kube-apiserver) in the bundle")
	}
	if len(files["master-0/var/log/rehearsal/kubelet.log"]) == 0 {
		t.Errorf("no master-0 kubelet log in the bundle")
	}
	for _, p := range []string{"summary.txt", "labbuild/status.json", "bootstrap/network/ip-addr.txt", "master-0/network/ip-route.txt"} {
		if len(files[p]) == 0 {
			t.Errorf("bundle: no %s", p)
		}
	}
	var manifests, assets int
	for p := range files {
		if strings.HasPrefix(p, "bootstrap/rendered-assets/static-pod-manifests/") {
			manifests++
		} else if strings.HasPrefix(p, "bootstrap/rendered-assets/") {
			assets++
		}
	}
	if manifests == 0 || assets == 0 {
		t.Errorf("bundle: bootstrap's rendered assets: %d static pod manifests, %d other files; want both", manifests, assets)
	}
	if !bytes.Contains(files["bootstrap/network/ip-addr.txt"], []byte(bootstrapIP)) {
		t.Errorf("bootstrap's network facts do not show its address %s", bootstrapIP)
	}
	if b := files["bootstrap/etcd/member-list.txt"]; !bytes.Contains(b, []byte("https://"+bootstrapIP+":2380")) {
		t.Errorf("bootstrap etcd member list does not show the bootstrap member:\n%s", b)
	}
	checkNoSecrets(t, r, files)

	r.stop("master-0")
	log, files = r.gatherBundle(t)
	if !strings.Contains(log, "NOT gathered: master-0") {
		t.Errorf("gather with master-0 stopped does not name it:\n%s", log)
	}
	if !regexp.MustCompile(`(?m)^NOT gathered master-0 `).Match(files["summary.txt"]) {
		t.Errorf("summary.txt does not name master-0 as not gathered:\n%s", files["summary.txt"])
	}
	if !regexp.MustCompile(`(?m)^gathered +bootstrap `).Match(files["summary.txt"]) {
		t.Errorf("summary.txt: the bootstrap was not gathered with master-0 down:\n%s", files["summary.txt"])
	}
	checkNoSecrets(t, r, files)
}

// checkNoSecrets greps every file of the bundle for the lab's secrets: the pull secret's auth,
// the SSH private key, the kubeadmin password, and any private key at all.
func checkNoSecrets(t *testing.T, r *rig, files map[string][]byte) {
	t.Helper()
	secrets := map[string][]byte{"PRIVATE KEY": []byte("PRIVATE KEY")}
	ps, _ := os.ReadFile(filepath.Join(r.lab, "pull-secret.json"))
	if m := regexp.MustCompile(`"auth":"([^"]+)"`).FindSubmatch(ps); m != nil {
		secrets["the pull secret's auth"] = m[1]
	} else {
		t.Fatalf("no auth in the lab's pull secret %s", ps)
	}
	priv, _ := os.ReadFile(filepath.Join(r.lab, "id"))
	secrets["the SSH private key"] = bytes.TrimSpace(priv)
	if pw, err := os.ReadFile(filepath.Join(r.lab, "out", "manifests", "kubeadmin", "kubeadmin-password")); err == nil {
		secrets["the kubeadmin password"] = bytes.TrimSpace(pw)
	}
	for p, b := range files {
		for what, s := range secrets {
			if len(s) > 0 && bytes.Contains(b, s) {
				t.Errorf("bundle file %s holds %s", p, what)
			}
		}
	}
	t.Logf("%d files in the bundle, none holding %d secrets; summary:\n%s", len(files), len(secrets), files["summary.txt"])
}
