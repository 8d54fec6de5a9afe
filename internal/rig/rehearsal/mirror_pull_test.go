package rehearsal

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// TestMirrorPullOnMaster is issue 29's "a real runtime pulls through the mirror": a lab with
// mirror.enabled, built by labbuild from an empty directory in the lab's namespace with a real
// libvirtd, so the real distribution registry holds the sample payload (mirror/release) and
// serves on the lab bridge libvirt/network made (198.18.0.1:5000, mirror/listener), which
// host/firewall opens to the nodes. master-0 boots from master-0.ign, whose
// /etc/containers/registries.conf is the MCO render's 99-master-generated-registries (from the
// ImageDigestMirrorSet), not the bootstrap's drop-in. Its real containerd (standing in for
// CRI-O) then pulls the pod image — by its upstream name, by digest — from the mirror, once
// with ctr (containerd's resolver in the client) and once through the CRI (PullImage, as the
// kubelet calls it), with the hosts.toml that the registries stand-in (registries.go) derives
// from the node's registries.conf, trust anchors and CRI-O's global auth file. The upstream
// registry is unreachable from the node: the same pull without the translation fails. The
// mirror's log shows the node's requests for the manifest by digest. A pull by tag is not
// sent to the mirror (mirror-by-digest-only).
func TestMirrorPullOnMaster(t *testing.T) {
	requireRehearsal(t)
	testenv.Require(t, "docker-registry")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// The bridge address is libvirt's (libvirt/network), as on a user's host: the registry on
	// it (mirror/listener) is started after the network, as the VMs need it.
	pool := flowPool(t) // before newRig: its cleanup runs after libvirtd's
	r := newRig(t, true)
	labYAMLPath := filepath.Join(r.lab, "lab.yaml")
	b, err := os.ReadFile(labYAMLPath)
	if err != nil {
		t.Fatal(err)
	}
	storage := filepath.Join(r.work, "mirror-storage")
	// As TestRehearsalFlow: the guests touch little of their memory and disk here (the pool on
	// flowPool's tmpfs, which host/preflight's disk check reads; libvirt/network needs it).
	lab := regexp.MustCompile(`(?m)^  poolPath: .*$`).ReplaceAllString(string(b), "  poolPath: "+pool)
	lab = strings.Replace(lab, "  domainType: qemu\n", "  domainType: qemu\n  memoryOvercommit: true\n", 1)
	lab += "sizes:\n  bootstrap: {diskGiB: 20}\n  master: {diskGiB: 20}\n"
	lab += fmt.Sprintf("mirror:\n  enabled: true\n  storage: %s\n  port: 5000\n", storage)
	if err := os.WriteFile(labYAMLPath, []byte(lab), 0o644); err != nil {
		t.Fatal(err)
	}
	// The registries run in the lab's namespace (labbuild started them there); they end with
	// the test, by process id.
	t.Cleanup(func() { killIn(r.labNS, "docker-registry") })

	start := time.Now()
	goals := []string{"host/firewall", "mirror/listener", "mirror/release", "ignition/master-0"}
	if out, err := r.labbuild(goals...); err != nil {
		t.Fatalf("labbuild: %v\n%s", err, out)
	}
	t.Logf("labbuild %s: %s", strings.Join(goals, " "), time.Since(start).Round(time.Second))

	nd, err := r.boot("master-0")
	if err != nil {
		t.Fatal(err)
	}
	// The node's registries.conf: the MCO's, from the IDMS; no bootstrap drop-in on a master.
	conf, err := os.ReadFile(filepath.Join(nd.Root, RegistriesConf))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), `location = "198.18.0.1:5000/ocp/art-dev"`) || !strings.Contains(string(conf), `pull-from-mirror = "digest-only"`) {
		t.Fatalf("master-0's %s has no art-dev mirror by digest (99-master-generated-registries):\n%s", RegistriesConf, conf)
	}
	if d, _ := filepath.Glob(filepath.Join(nd.Root, RegistriesConfDir, "*")); len(d) > 0 {
		t.Errorf("master-0 has registries.conf drop-ins %v: the master's mirror must come from the MCO render", d)
	}
	// The kubelet unit's environment file, as rig.kubelet: the runtime endpoint and the pod
	// image are read from the unit.
	if err := RunOneshot(ctx, nd, "kubelet-auto-node-size.service"); err != nil {
		t.Fatal(err)
	}
	kl, err := KubeletFromUnit(nd.Root, r.bins["kubelet"])
	if err != nil {
		t.Fatal(err)
	}
	var podImage string
	for _, a := range kl.Argv {
		if v, ok := strings.CutPrefix(a, "--pod-infra-container-image="); ok {
			podImage = v
		}
	}
	if !strings.Contains(podImage, "@sha256:") {
		t.Fatalf("kubelet.service --pod-infra-container-image=%q is not by digest", podImage)
	}
	digest := podImage[strings.Index(podImage, "@")+1:]
	if err := StartRuntime(ctx, nd, kl.Endpoint, "10.128.0.0/23", r.pause); err != nil {
		t.Fatal(err)
	}
	ctr := func(log string, args ...string) error {
		return nd.Run(ctx, log, nil, append([]string{"ctr", "--address", kl.Endpoint, "-n", "k8s.io"}, args...)...)
	}

	// The upstream is unreachable from the node: without the translation the pull fails.
	err = ctr("ctr-upstream", "images", "pull", "--snapshotter", "native", "--hosts-dir", "/nonexistent", podImage)
	if err == nil {
		t.Fatalf("%s pulled from its upstream registry: it must be unreachable from the node", podImage)
	}
	t.Logf("without the mirror: %s", lastLine(err.Error()))

	// A tag is not mirrored (mirror-by-digest-only): its only source is the upstream.
	repo := podImage[:strings.Index(podImage, "@")]
	tagPlan, err := PullPlanFor(nd.Root, repo+":latest")
	if err != nil {
		t.Fatal(err)
	}
	if len(tagPlan.Sources) != 1 || tagPlan.Sources[0].Mirror {
		t.Errorf("pull sources of %s:latest = %+v, want the upstream only (digest-only mirrors)", repo, tagPlan.Sources)
	}

	plan, err := PullPlanFor(nd.Root, podImage)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Sources) != 2 || !plan.Sources[0].Mirror || plan.Sources[0].Host != "198.18.0.1:5000" {
		t.Fatalf("pull sources of %s = %+v, want the mirror 198.18.0.1:5000 then the upstream", podImage, plan.Sources)
	}
	if !strings.Contains(string(plan.HostsTOML), "Authorization") || len(plan.Files) != 1 {
		t.Errorf("hosts.toml has no mirror credentials (global_auth_file) or no CA bundle (%d files):\n%s", len(plan.Files), redactAuth(plan.HostsTOML))
	}
	t.Logf("hosts.toml for %s:\n%s", plan.Host, redactAuth(plan.HostsTOML))
	if err := plan.Write(nd.Root); err != nil {
		t.Fatal(err)
	}
	mirrorLog := filepath.Join(storage, "logs", "registry-198.18.0.1-5000.log")
	before := fileSize(mirrorLog)
	if err := ctr("ctr-pull", "images", "pull", "--snapshotter", "native", "--hosts-dir", ContainerdHostsDir, podImage); err != nil {
		t.Fatal(err)
	}
	if n := nodeRequests(t, mirrorLog, before, master0IP, digest); n == 0 {
		t.Errorf("the mirror's log has no request from master-0 (%s) for manifest %s after ctr's pull", master0IP, digest)
	}

	// Through the CRI, in containerd's daemon: PullImage as the kubelet calls it, of an image
	// ctr has not pulled — the release image (release.image, by digest) — then ImageStatus by
	// its upstream name.
	labYAML, _ := os.ReadFile(filepath.Join(r.lab, "lab.yaml"))
	release := regexp.MustCompile(`(?m)^  image: (\S+@sha256:[0-9a-f]{64})$`).FindStringSubmatch(string(labYAML))
	if release == nil {
		t.Fatalf("no release.image by digest in lab.yaml:\n%s", labYAML)
	}
	if err := criPullChecked(ctx, t, nd, kl.Endpoint, release[1], mirrorLog); err != nil {
		t.Fatal(err)
	}
}

// criPullChecked pulls image through the CRI after writing its pull plan, and checks the
// mirror's log shows master-0's request for its manifest.
func criPullChecked(ctx context.Context, t *testing.T, nd *Node, endpoint, release, mirrorLog string) error {
	t.Helper()
	cplan, err := PullPlanFor(nd.Root, release)
	if err != nil {
		return err
	}
	if err := cplan.Write(nd.Root); err != nil {
		return err
	}
	before := fileSize(mirrorLog)
	ref, err := criPull(ctx, nd, endpoint, release)
	if err != nil {
		return fmt.Errorf("CRI PullImage %s: %w", release, err)
	}
	t.Logf("CRI PullImage %s: %s", release, ref)
	if n := nodeRequests(t, mirrorLog, before, master0IP, release[strings.Index(release, "@")+1:]); n == 0 {
		t.Errorf("the mirror's log has no request from master-0 for %s after the CRI pull", release)
	}
	return nil
}

// criPull calls the CRI image service on endpoint (in the node's /run) as the kubelet does:
// PullImage with no credentials, then ImageStatus of the image by the name it was asked for.
func criPull(ctx context.Context, nd *Node, endpoint, image string) (string, error) {
	inRun := endpoint
	if rest, ok := strings.CutPrefix(endpoint, "/var/run/"); ok {
		inRun = "/run/" + rest
	}
	sock := fmt.Sprintf("/proc/%d/root%s", nd.holder.Process.Pid, inRun)
	conn, err := grpc.NewClient("passthrough:///cri", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	is := runtimeapi.NewImageServiceClient(conn)
	pctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	resp, err := is.PullImage(pctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		return "", err
	}
	st, err := is.ImageStatus(pctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		return "", err
	}
	if st.Image == nil {
		return "", fmt.Errorf("ImageStatus %s: not present after PullImage (ref %s)", image, resp.ImageRef)
	}
	return fmt.Sprintf("image ref %s, repo digests %v", resp.ImageRef, st.Image.RepoDigests), nil
}

// nodeRequests counts the mirror log's requests (after offset) from ip for a manifest by
// digest answered 200, and logs them. distribution logs each as "response completed" with
// http.request.remoteaddr, http.request.uri and http.response.status.
func nodeRequests(t *testing.T, log string, offset int64, ip, digest string) int {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("the mirror's log: %v", err)
	}
	if int64(len(b)) < offset {
		offset = 0
	}
	n := 0
	for _, l := range strings.Split(string(b[offset:]), "\n") {
		if strings.Contains(l, `http.request.remoteaddr="`+ip+`:`) && strings.Contains(l, "/manifests/"+digest) && strings.Contains(l, "http.response.status=200") {
			n++
			if n == 1 {
				t.Logf("mirror log: %s", l)
			}
		}
	}
	return n
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// redactAuth hides the Basic credentials of a hosts.toml for the test log.
func redactAuth(b []byte) string {
	return regexp.MustCompile(`Basic [A-Za-z0-9+/=]+`).ReplaceAllString(string(b), "Basic <redacted>")
}
