package rehearsal

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// HostImage is a STAND-IN for a release component image that cannot be pulled here: built
// locally like PauseTarball (go-containerregistry, one layer), from this host's Debian
// programs and the shared libraries they load, laid out merged-/usr as in the RHEL-based
// images (/bin, /sbin, /lib, /lib64 are links into /usr). The kubelet runs it under containerd
// exactly as the pod manifest says; only the image's content is the host's.
type HostImage struct {
	// Tag is the release payload tag the image stands in for (keepalived-ipfailover); the
	// rehearsal names it with that tag's pull spec in the node's containerd (ImportImages).
	Tag string
	// Files are host paths copied to the same path in the image (a symlink's target content
	// under the link's name: /usr/bin/awk is mawk, /usr/bin/pidof is killall5, which both
	// act on their argv[0]), each with the shared libraries ldd lists for it.
	Files []string
	// Dirs are host directories copied whole, with the libraries of their shared objects:
	// modules a program loads with dlopen (iptables' xtables extensions).
	Dirs []string
	// As maps an image path to the host file put there (the runtimecfg stand-in under the
	// program names the MCO's pods call: runtimecfg, dynkeepalived, monitor).
	As map[string]string
}

// OnPremImages are the stand-ins for the images the MCO's on-prem static pods name on the
// masters (templates/common/on-prem/files/keepalived.yaml, templates/master/00-master/on-prem/
// files/haproxy.yaml), each with what those pods' commands and probes call:
//   - keepalived-ipfailover: the keepalived container's bash script (pgrep, ip, awk, socat,
//     Debian keepalived) and its liveness probe (seq, grep), and the check scripts keepalived
//     runs (timeout, curl, chroot);
//   - haproxy-router: the haproxy container's bash script (pidof, socat, Debian haproxy);
//   - baremetal-runtimecfg: the runtimecfg stand-in (internal/rig/standin/runtimecfg at runtimecfg
//     render, dynkeepalived and monitor), curl for the verify-api-int-resolvable init
//     container, and iptables with its extensions, which the real monitor's go-iptables runs.
//
// The coredns image is not among them: Debian has no CoreDNS; the coredns pods stay not Ready
// (cluster/pivot does not wait for them).
func OnPremImages(runtimecfg string) []HostImage {
	shell := []string{"/usr/bin/bash", "/usr/bin/sleep", "/usr/bin/rm", "/usr/bin/cat", "/usr/bin/socat"}
	return []HostImage{
		{Tag: "keepalived-ipfailover", Files: append(slicesOf(shell), "/usr/sbin/keepalived", "/usr/bin/pgrep", "/usr/bin/ip",
			"/usr/bin/awk", "/usr/bin/seq", "/usr/bin/grep", "/usr/bin/timeout", "/usr/bin/curl", "/usr/sbin/chroot")},
		{Tag: "haproxy-router", Files: append(slicesOf(shell), "/usr/sbin/haproxy", "/usr/bin/pidof")},
		{Tag: "baremetal-runtimecfg", Files: append(slicesOf(shell), "/usr/bin/curl", "/usr/sbin/iptables"),
			Dirs: []string{"/usr/lib/x86_64-linux-gnu/xtables"},
			As:   map[string]string{"/usr/bin/runtimecfg": runtimecfg, "/usr/bin/dynkeepalived": runtimecfg, "/usr/bin/monitor": runtimecfg}},
	}
}

func slicesOf(s []string) []string { return append([]string(nil), s...) }

// imageBaseFiles are the files every HostImage carries besides its programs: the users
// keepalived's script_user and enable_script_security look up. Tarball also writes the
// merged-/usr links and the directories the pods' programs write (haproxy's pid and stats
// socket, keepalived's /tmp/keepalived.data for its liveness probe). Ordered: the same host
// gives the same image digest.
var imageBaseFiles = [][2]string{{"etc/group", "root:x:0:\n"}, {"etc/passwd", "root:x:0:0:root:/root:/bin/bash\n"}}

// Tarball writes im as a docker-archive tarball named ref (a tag) to file.
func (im HostImage) Tarball(file, ref string) error {
	files := map[string]string{} // image path (no leading /) → host file
	add := func(img, host string) { files[strings.TrimPrefix(usrMerged(img), "/")] = host }
	var objs []string
	for _, f := range im.Files {
		add(f, f)
		objs = append(objs, f)
	}
	for _, d := range im.Dirs {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				add(p, p)
				objs = append(objs, p)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("rehearsal: image %s: %w", im.Tag, err)
		}
	}
	for img, host := range im.As {
		add(img, host)
	}
	for _, o := range objs {
		libs, err := sharedLibs(o)
		if err != nil {
			return fmt.Errorf("rehearsal: image %s: %w", im.Tag, err)
		}
		for _, l := range libs {
			add(l, l)
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	mkdir := func(d string, mode int64) {
		for _, p := range parents(d) {
			if !dirs[p] {
				dirs[p] = true
				tw.WriteHeader(&tar.Header{Name: p + "/", Typeflag: tar.TypeDir, Mode: mode})
			}
		}
	}
	for _, d := range []string{"usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "run", "var/lib/haproxy/run", "root", "etc"} {
		mkdir(d, 0o755)
	}
	mkdir("tmp", 0o1777)
	for _, l := range [][2]string{{"bin", "usr/bin"}, {"lib", "usr/lib"}, {"lib64", "usr/lib64"}, {"sbin", "usr/sbin"}, {"var/run", "../run"}} {
		tw.WriteHeader(&tar.Header{Name: l[0], Typeflag: tar.TypeSymlink, Linkname: l[1], Mode: 0o777})
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(files[n])
		if err != nil {
			return fmt.Errorf("rehearsal: image %s: %w", im.Tag, err)
		}
		mkdir(path.Dir(n), 0o755)
		tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(b))})
		tw.Write(b)
	}
	for _, f := range imageBaseFiles {
		tw.WriteHeader(&tar.Header{Name: f[0], Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f[1]))})
		tw.Write([]byte(f[1]))
	}
	// /bin/sh is bash, as in the RHEL-based images: socat's system: address runs `bash -c
	// msg_handler` through /bin/sh with functions the script exported, which dash would drop.
	tw.WriteHeader(&tar.Header{Name: "usr/bin/sh", Typeflag: tar.TypeSymlink, Linkname: "bash", Mode: 0o777})
	if err := tw.Close(); err != nil {
		return err
	}
	return writeImage(file, ref, buf.Bytes(), v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}})
}

// usrMerged maps /bin, /sbin, /lib, /lib64 paths to their /usr place (Debian 12 and RHEL 9 are
// merged-/usr: ldd prints /lib/x86_64-linux-gnu/libc.so.6 for /usr/lib/x86_64-linux-gnu/...).
func usrMerged(p string) string {
	for _, d := range []string{"/bin/", "/sbin/", "/lib/", "/lib64/"} {
		if strings.HasPrefix(p, d) {
			return "/usr" + p
		}
	}
	return p
}

// parents returns d and its parent directories, outermost first ("a/b" → a, a/b).
func parents(d string) []string {
	if d == "." || d == "" {
		return nil
	}
	return append(parents(path.Dir(d)), d)
}

var lddPath = regexp.MustCompile(`(?m)(?:=>\s*)?(/\S+)\s+\(0x`)

// sharedLibs lists the shared libraries (and the dynamic loader) ldd reports for file; none
// for a static program.
func sharedLibs(file string) ([]string, error) {
	out, err := exec.Command("ldd", file).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("not a dynamic executable")) {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %w: %s", file, err, bytes.TrimSpace(out))
	}
	if bytes.Contains(out, []byte("not found")) {
		return nil, fmt.Errorf("ldd %s: a library is missing: %s", file, bytes.TrimSpace(out))
	}
	var libs []string
	for _, m := range lddPath.FindAllStringSubmatch(string(out), -1) {
		libs = append(libs, m[1])
	}
	return libs, nil
}

// OnPremImageRef is the local name of the stand-in image for payload tag tag.
func OnPremImageRef(tag string) string { return "labbuild.rehearsal/" + tag + ":standin" }

// ImageTar is a docker-archive tarball (File) of an image named Ref, and the pull specs it
// stands in for.
type ImageTar struct {
	File, Ref string
	Specs     []string
}

// ImportImages imports each tarball into the node's containerd (k8s.io namespace, the CRI's)
// and names its image with each pull spec, as a pull of that spec would have: the kubelet
// then finds a static pod's `image:` present and, with imagePullPolicy IfNotPresent, pulls
// nothing.
func ImportImages(ctx context.Context, nd *Node, endpoint string, tars []ImageTar) error {
	for _, it := range tars {
		if err := nd.Run(ctx, "ctr", nil, "ctr", "--address", endpoint, "-n", "k8s.io", "images", "import", "--snapshotter", "native", it.File); err != nil {
			return err
		}
		for _, spec := range it.Specs {
			if err := nd.Run(ctx, "ctr", nil, "ctr", "--address", endpoint, "-n", "k8s.io", "images", "tag", "--force", it.Ref, spec); err != nil {
				return err
			}
		}
	}
	return nil
}
