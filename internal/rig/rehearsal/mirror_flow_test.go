package rehearsal

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/internal/rig/payload"
	"github.com/labbuild/labbuild/internal/rig/repo"
)

// The mirror in a flow (issue 38, stall 11): `labbuild cluster` with mirror.enabled must start
// and fill the mirror (mirror/registry, mirror/release) before any VM; the upstream the mirror
// copied from (a registry holding the sample payload, upstreamRegistry) is then stopped,
// and every image a kubelet node pulls — its kubelet's pod image and its static pods' images —
// is pulled through the node's own registries.conf (the MCO's 99-<pool>-generated-registries
// from labbuild's ImageDigestMirrorSet), CRI-O's lookup standing in (PullPlanFor), by the real
// containerd through the CRI as the kubelet pulls; each pull must show in the mirror's log as
// the node's request for that manifest by digest.

// mirrorFlowPort is the mirror's port on the lab bridge in the flow (the lab default).
const mirrorFlowPort = 5000

// mirrorFlowLab adds mirror.enabled to the flow's lab.yaml, the registry's storage under the
// rig's work directory; it returns the mirror's log (distribution's, where mirror/registry
// writes it).
func (r *rig) mirrorFlowLab(t *testing.T) string {
	t.Helper()
	storage := filepath.Join(r.work, "mirror-storage")
	f, err := os.OpenFile(filepath.Join(r.lab, "lab.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "mirror:\n  enabled: true\n  storage: %s\n  port: %d\n", storage, mirrorFlowPort)
	f.Close()
	// The registry labbuild starts in the lab's namespace outlives labbuild; it ends with the
	// test, by process id (after the flow's destroy, which keeps the mirror).
	t.Cleanup(func() { killIn(r.labNS, "docker-registry") })
	return filepath.Join(storage, "logs", fmt.Sprintf("registry-198.18.0.1-%d.log", mirrorFlowPort))
}

// upstreamRegistry is the release's upstream in the mirror flow: go-containerregistry's
// registry (as testenv.StartRegistry's) behind basic auth on 127.0.0.1 of the lab's network
// namespace, where labbuild (in the holder) reaches it and no node can. The sample payload is
// pushed there with its repositories named after it, and the lab's release.image and pull
// secret point at it (no release.mirrors).
type upstreamRegistry struct {
	Host, User, Password string
	srv                  *http.Server
	stopped              atomic.Bool
}

// startUpstream serves the registry in the lab's namespace and pushes a payload built like
// newLab's (the MCO stand-in in its MCO image) with repositories on it; it rewrites the lab's
// release.image, drops release.mirrors and writes the registry's credentials as the pull secret.
func (r *rig) startUpstream(t *testing.T) *upstreamRegistry {
	t.Helper()
	ln, err := ListenIn(r.labNS, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstreamRegistry{Host: ln.Addr().String(), User: "labbuild-upstream", Password: "test-password-not-a-secret"}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	u.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if user, pass, ok := req.BasicAuth(); !ok || user != u.User || pass != u.Password {
			w.Header().Set("WWW-Authenticate", `Basic realm="labbuild-upstream"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, req)
	})}
	go u.srv.Serve(ln)
	t.Cleanup(u.stop)
	bin, err := payload.BuildStandin(context.Background(), repo.Root(), "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := payload.Build(payload.Options{Shared: repo.Shared(), MCOBinary: bin,
		ReleaseRepo: u.Host + "/ocp/release", ComponentRepo: u.Host + "/ocp/art-dev"})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DialContext: DialIn(r.labNS)}
	if err := p.Push(context.Background(), remote.WithTransport(tr), remote.WithAuth(&authn.Basic{Username: u.User, Password: u.Password})); err != nil {
		t.Fatal(err)
	}
	r.payload = p
	labPath := filepath.Join(r.lab, "lab.yaml")
	b, err := os.ReadFile(labPath)
	if err != nil {
		t.Fatal(err)
	}
	s := regexp.MustCompile(`(?m)^  image: \S+$`).ReplaceAllLiteralString(string(b), "  image: "+p.ReleaseRef())
	s = regexp.MustCompile(`(?m)^  mirrors:\n(    .*\n)+`).ReplaceAllLiteralString(s, "")
	if strings.Contains(s, "oci:") {
		t.Fatalf("lab.yaml still names the payload layout:\n%s", s)
	}
	if err := os.WriteFile(labPath, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte(u.User + ":" + u.Password))
	if err := os.WriteFile(filepath.Join(r.lab, "pull-secret.json"), []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`+"\n", u.Host, auth)), 0o600); err != nil {
		t.Fatal(err)
	}
	return u
}

// stop takes the upstream away: the registry closes its listener and connections.
func (u *upstreamRegistry) stop() {
	if u.stopped.CompareAndSwap(false, true) {
		u.srv.Close()
	}
}

// killIn ends the processes of network namespace ns whose command line contains prog, by id.
func killIn(ns, prog string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 1 {
			continue
		}
		b, _ := os.ReadFile("/proc/" + f + "/cmdline")
		if strings.Contains(string(b), prog) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// nodeImages are the images node's kubelet pulls: its unit's --pod-infra-container-image and
// the images of its static pods (/etc/kubernetes/manifests), without those the rig imports
// (imported: stand-in images named with payload pull specs), sorted.
func nodeImages(nd *Node, kl *Kubelet, imported []string) ([]string, error) {
	set := map[string]bool{}
	for _, a := range kl.Argv {
		if v, ok := strings.CutPrefix(a, "--pod-infra-container-image="); ok && v != "" {
			set[v] = true
		}
	}
	ents, _ := os.ReadDir(filepath.Join(nd.Root, PodManifestDir))
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(nd.Root, PodManifestDir, e.Name()))
		if err != nil {
			return nil, err
		}
		var pod corev1.Pod
		if err := yaml.Unmarshal(b, &pod); err != nil {
			continue
		}
		for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			set[c.Image] = true
		}
	}
	var out []string
	for im := range set {
		if im != "" && !slices.Contains(imported, im) {
			out = append(out, im)
		}
	}
	slices.Sort(out)
	return out, nil
}

// pullThroughMirror pulls each image as the node's CRI-O would (PullPlanFor on the node's
// registries.conf, trust and global auth file, written as containerd's hosts.toml), through the
// CRI (criPull: PullImage as the kubelet calls it), and checks the mirror's log for the node's
// request of that manifest by digest. It returns one line per image and the first failure.
func pullThroughMirror(ctx context.Context, nd *Node, endpoint, ip, mirrorLog string, images []string) ([]string, error) {
	var lines []string
	for _, im := range images {
		at := strings.Index(im, "@")
		if at < 0 {
			return lines, fmt.Errorf("%s: image %s is not by digest: a digest-only mirror cannot serve it", nd.Name, im)
		}
		plan, err := PullPlanFor(nd.Root, im)
		if err != nil {
			return lines, fmt.Errorf("%s: %s: %w", nd.Name, im, err)
		}
		if len(plan.Sources) == 0 || !plan.Sources[0].Mirror {
			return lines, fmt.Errorf("%s: %s: the node's registries.conf names no mirror for it (sources %+v)", nd.Name, im, plan.Sources)
		}
		if err := plan.Write(nd.Root); err != nil {
			return lines, err
		}
		before := fileSize(mirrorLog)
		if _, err := criPull(ctx, nd, endpoint, im); err != nil {
			return lines, fmt.Errorf("%s: CRI PullImage %s (first source %s): %w", nd.Name, im, plan.Sources[0].Host, err)
		}
		n, err := mirrorRequests(mirrorLog, before, ip, im[at+1:])
		if err != nil {
			return lines, err
		}
		if n == 0 {
			return lines, fmt.Errorf("%s: pulled %s, but the mirror's log has no request from %s for its manifest", nd.Name, im, ip)
		}
		lines = append(lines, fmt.Sprintf("%s from %s (%d manifest requests in the mirror's log)", im, plan.Sources[0].Host, n))
	}
	return lines, nil
}

// mirrorRequests is nodeRequests without a test: the count of the log's requests (after
// offset) from ip for the manifest by digest, answered 200.
func mirrorRequests(log string, offset int64, ip, digest string) (int, error) {
	b, err := os.ReadFile(log)
	if err != nil {
		return 0, fmt.Errorf("the mirror's log: %w", err)
	}
	if int64(len(b)) < offset {
		offset = 0
	}
	n := 0
	for _, l := range strings.Split(string(b[offset:]), "\n") {
		if strings.Contains(l, `http.request.remoteaddr="`+ip+`:`) && strings.Contains(l, "/manifests/"+digest) && strings.Contains(l, "http.response.status=200") {
			n++
		}
	}
	return n, nil
}

// TestRehearsalMirrorFlow is TestRehearsalFlow for one master and one worker with
// mirror.enabled (issue 38, stall 11): `labbuild cluster` starts the mirror and copies the
// release into it before any VM, and serves it on the lab bridge (mirror/listener, after
// libvirt/network); when the first domain starts the upstream registry stops; every image
// master-0's and worker-0's kubelets pull is pulled from the mirror (the mirror's log shows
// each node's request), and the flow reaches cluster/done as the others do.
func TestRehearsalMirrorFlow(t *testing.T) {
	rehearsalFlow(t, flowTopology{masters: 1, workers: 1, mirror: true})
}

// checkMirrorPulls: every kubelet node of nodes pulled at least one image, each from the
// mirror, and none failed.
func checkMirrorPulls(t *testing.T, r *rig, nodes []string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range nodes {
		switch {
		case r.pullErr[n] != nil:
			t.Errorf("mirror: %v", r.pullErr[n])
		case len(r.pulls[n]) == 0:
			t.Errorf("mirror: %s pulled no image", n)
		default:
			t.Logf("mirror: %s pulled %s", n, strings.Join(r.pulls[n], "; "))
		}
	}
}
