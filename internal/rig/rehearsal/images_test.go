package rehearsal

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// TestOnPremImagesRun builds each OnPremImages stand-in (twice: the same digest), unpacks its
// layer as a container runtime would, and runs in it (chroot) what the MCO's on-prem pods call
// from that image: the programs start from the image alone, with their libraries and extensions.
func TestOnPremImagesRun(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "chroot into the unpacked images needs root")
	}
	for _, p := range []string{"/usr/sbin/keepalived", "/usr/sbin/haproxy", "/usr/sbin/iptables", "/usr/bin/curl", "/usr/bin/socat"} {
		if _, err := os.Stat(p); err != nil {
			testenv.Missing(t, "Debian keepalived, haproxy, iptables, curl, socat (bash .ci/install-keepalived.sh): "+p)
		}
	}
	dir := t.TempDir()
	standin := buildRuntimecfgStandin(t, filepath.Join(dir, "runtimecfg-standin"))
	checks := map[string][]struct{ script, want string }{
		"keepalived-ipfailover": {
			{"keepalived --version 2>&1", "Keepalived v"},
			{"socat -V", "socat by Gerhard Rieger"},
			{"echo 198.18.0.1 | awk '{print $1}'; seq 2 2; timeout 1 sleep 0 && echo timeout-ok", "198.18.0.1\n2\ntimeout-ok"},
			{"pgrep -o nothing-runs-by-this-name; echo $?", "1"},
			{"ip -V", "ip utility"},
			{"curl --version", "curl "},
			{"id -u 2>/dev/null || getent passwd root || grep ^root: /etc/passwd", "root:x:0:0"},
			{"readlink /bin/sh", "bash"},
		},
		"haproxy-router": {
			{"haproxy -v", "HAProxy version"},
			{"pidof nothing-runs-by-this-name; echo $?", "1"},
			{"socat -V", "socat by Gerhard Rieger"},
		},
		"baremetal-runtimecfg": {
			{"curl --version", "curl "},
			{"iptables -V", "nf_tables"},
			{"monitor 2>&1; true", "usage: monitor"},
			{"runtimecfg 2>&1; true", "only the render command"},
			{"dynkeepalived 2>&1; true", "want <kubeconfig> <template> <config>"},
		},
	}
	for _, im := range OnPremImages(standin) {
		t.Run(im.Tag, func(t *testing.T) {
			file := filepath.Join(dir, im.Tag+".tar")
			if err := im.Tarball(file, OnPremImageRef(im.Tag)); err != nil {
				t.Fatal(err)
			}
			// The same host gives the same image (the same digest in each node's containerd).
			again := filepath.Join(dir, im.Tag+"-again.tar")
			if err := im.Tarball(again, OnPremImageRef(im.Tag)); err != nil {
				t.Fatal(err)
			}
			if a, b := digestOf(t, file), digestOf(t, again); a != b {
				t.Errorf("two builds of %s differ: %s, %s", im.Tag, a, b)
			}
			root := filepath.Join(dir, im.Tag)
			unpack(t, file, root)
			if len(checks[im.Tag]) == 0 {
				t.Fatalf("no checks for image %s", im.Tag)
			}
			for _, c := range checks[im.Tag] {
				cmd := exec.Command("chroot", root, "/bin/bash", "-c", c.script)
				cmd.Env = []string{"PATH=/usr/sbin:/usr/bin"}
				out, err := cmd.CombinedOutput()
				if !strings.Contains(string(out), c.want) {
					t.Errorf("%s: %q: %v\n%s\nwant %q", im.Tag, c.script, err, out, c.want)
				}
			}
		})
	}
}

// digestOf is the image digest of the docker-archive tarball file.
func digestOf(t *testing.T, file string) string {
	t.Helper()
	img, err := tarball.ImageFromPath(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// unpack extracts the single layer of the docker-archive image in file into root.
func unpack(t *testing.T, file, root string) {
	t.Helper()
	img, err := tarball.ImageFromPath(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := img.Layers()
	if err != nil || len(ls) != 1 {
		t.Fatalf("layers: %v %d", err, len(ls))
	}
	rc, err := ls[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			os.MkdirAll(p, os.FileMode(h.Mode))
		case tar.TypeSymlink:
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			os.MkdirAll(filepath.Dir(p), 0o755)
			b, _ := io.ReadAll(tr)
			if err := os.WriteFile(p, b, os.FileMode(h.Mode)); err != nil {
				t.Fatal(err)
			}
		}
	}
}
