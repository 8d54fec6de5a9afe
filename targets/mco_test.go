package targets

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	types34 "github.com/coreos/ignition/v2/config/v3_4/types"
	"golang.org/x/crypto/ssh"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/repo"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/render/mco"
)

// mcoLab builds the mco and ignition families with the real pki, kubeconfig and manifests
// families and stand-ins for the release targets: release/mco (the internal/rig/standin/mco binary
// under both names plus the real templates of ../shared/fixtures/mco/templates),
// release/image-references (an ImageStream with the payload tags), release/resolve and
// release/image/<tag> (fake digest pull specs) and release/crds (the fixture CRDs).
type mcoLab struct {
	t        testing.TB
	cfg      *lab.Config
	out      string
	shared   string
	standin  string // path of the built internal/rig/standin/mco
	digest   int    // bumps the stand-in release/resolve digest (and its Version)
	operator []byte // when set, replaces bin/machine-config-operator (failure tests)
	imageRef string // when set, replaces image-references
	log      bytes.Buffer
}

var (
	mcoStandinOnce sync.Once
	mcoStandinPath string
	mcoStandinErr  error
)

// mcoStandinBinary builds ./internal/rig/standin/mco once per test binary into a fixed cache path per
// checkout (overwritten atomically each time, so repeated runs do not accumulate binaries).
func mcoStandinBinary(t testing.TB) string {
	t.Helper()
	mcoStandinOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		dir := filepath.Join(cache, "labbuild", "test")
		if mcoStandinErr = os.MkdirAll(dir, 0o755); mcoStandinErr != nil {
			return
		}
		tmp, err := os.CreateTemp(dir, "mco-standin-*")
		if err != nil {
			mcoStandinErr = err
			return
		}
		tmp.Close()
		cmd := exec.Command("go", "build", "-o", tmp.Name(), "./internal/rig/standin/mco")
		cmd.Dir = repo.Root()
		if out, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp.Name())
			mcoStandinErr = fmt.Errorf("go build ./internal/rig/standin/mco: %v\n%s", err, out)
			return
		}
		// One path per checkout: worktrees of this repository on one machine share the
		// cache directory, and another's build must not replace this one's mid-run.
		sum := sha256.Sum256([]byte(repo.Root()))
		mcoStandinPath = filepath.Join(dir, fmt.Sprintf("mco-standin-%x", sum[:6]))
		mcoStandinErr = os.Rename(tmp.Name(), mcoStandinPath)
	})
	if mcoStandinErr != nil {
		t.Fatalf("building the MCO stand-in: %v", mcoStandinErr)
	}
	return mcoStandinPath
}

const mcoTestPullSecret = `{"auths":{"quay.io":{"auth":"bWNvdGVzdDpzZWNyZXQtcHVsbC1zZWNyZXQ="}}}`

func newMCOLab(t testing.TB) *mcoLab {
	shared := testenv.RequireShared(t)
	dir := t.TempDir()
	ps := filepath.Join(dir, "pull-secret.json")
	if err := os.WriteFile(ps, []byte(mcoTestPullSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "id_ed25519.pub")
	if err := os.WriteFile(key, ssh.MarshalAuthorizedKey(sp), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testLabConfig()
	cfg.Access.PullSecretFile = ps
	cfg.Access.SSHKeyFile = key
	cfg.PKI.KeyAlgorithm = "ECDSA-P256" // fast keys; the algorithm is not under test here
	return &mcoLab{t: t, cfg: cfg, out: filepath.Join(dir, "out"), shared: shared, standin: mcoStandinBinary(t)}
}

// mcoImageReferences is an ImageStream with every payload tag labbuild uses, each a fake
// digest pull spec.
func mcoImageReferences() string {
	var b strings.Builder
	b.WriteString("kind: ImageStream\napiVersion: image.openshift.io/v1\nmetadata:\n  name: 4.18.0\nspec:\n  tags:\n")
	for i, tag := range []string{"machine-config-operator", "keepalived-ipfailover", "coredns", "baremetal-runtimecfg",
		"oauth-proxy", "kube-rbac-proxy", "pod", "haproxy-router", "rhel-coreos", "rhel-coreos-extensions", "etcd", "hyperkube"} {
		b.WriteString("  - name: " + tag + "\n    from:\n      kind: DockerImage\n      name: quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" +
			strings.Repeat(string(rune('a'+i%6)), 64) + "\n")
	}
	return b.String()
}

// standinRelease returns the stand-in release targets of the lab's current state.
func (l *mcoLab) standinRelease() []*engine.Target {
	crds := map[string][]byte{}
	for _, dir := range []string{"fixtures/release/crds"} {
		entries, err := os.ReadDir(filepath.Join(l.shared, dir))
		if err != nil {
			l.t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(l.shared, dir, e.Name()))
			if err != nil {
				l.t.Fatal(err)
			}
			crds[e.Name()] = b
		}
	}
	var ts []*engine.Target
	for _, t := range mfStandinRelease(crds) {
		if t.Name != "release/resolve" {
			ts = append(ts, t)
		}
	}
	digest := strings.Repeat(string(rune('0'+l.digest%10)), 64)
	ts = append(ts, &engine.Target{Name: "release/resolve", Doc: "stand-in", Version: 1 + l.digest, Run: func(ctx context.Context, s *engine.Step) error {
		return s.WriteFile("pullspec", []byte("quay.io/openshift-release-dev/ocp-release@sha256:"+digest+"\n"), 0o644)
	}})
	refs := mcoImageReferences()
	refVersion := 1
	if l.imageRef != "" {
		refs, refVersion = l.imageRef, 2
	}
	ts = append(ts, &engine.Target{Name: "release/image-references", Doc: "stand-in", Version: refVersion, Run: func(ctx context.Context, s *engine.Step) error {
		return s.WriteFile("image-references", []byte(refs), 0o644)
	}})
	bin, err := os.ReadFile(l.standin)
	if err != nil {
		l.t.Fatal(err)
	}
	operator, opVersion := bin, 1
	if l.operator != nil {
		operator, opVersion = l.operator, 2
	}
	templates := filepath.Join(l.shared, "fixtures/mco/templates")
	ts = append(ts, &engine.Target{Name: "release/mco", Doc: "stand-in: internal/rig/standin/mco as both MCO binaries, fixture templates", Version: opVersion,
		Run: func(ctx context.Context, s *engine.Step) error {
			if err := s.WriteFile("bin/machine-config-operator", operator, 0o755); err != nil {
				return err
			}
			if err := s.WriteFile("bin/machine-config-controller", bin, 0o755); err != nil {
				return err
			}
			return filepath.WalkDir(templates, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(templates, p)
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				return s.WriteFile("templates/"+filepath.ToSlash(rel), b, 0o644)
			})
		}})
	return ts
}

// build runs one build of goals and returns its result; a failed build is returned with
// its error for the failure tests.
func (l *mcoLab) tryBuild(goals ...string) (*engine.Result, error) {
	return l.tryBuildForce(false, goals...)
}

// tryBuildForce is tryBuild, with force as -B (every target but the sticky keys runs).
func (l *mcoLab) tryBuildForce(force bool, goals ...string) (*engine.Result, error) {
	l.t.Helper()
	cfg := reparsed(l.t, l.cfg, filepath.Join(filepath.Dir(l.out), "lab.json"))
	ts := append(append(append(append(append(pkiTargets(cfg), kubeconfigTargets(cfg)...), manifestsTargets(cfg)...),
		mcoTargets(cfg)...), ignitionTargets(cfg)...), l.standinRelease()...)
	ts = append(ts, mirrorCredentialsOnly(cfg)...) // with mirror.enabled (mirror_ignition_test.go)
	l.log.Reset()
	return engine.Build(context.Background(), engine.Options{Config: Lab{Config: cfg}, OutDir: l.out, Goals: goals, Jobs: 2, Targets: ts, Force: force,
		Now: func() time.Time { return pkiT0 }, Stdout: &l.log, Stderr: &l.log})
}

func (l *mcoLab) build(goals ...string) *engine.Result {
	l.t.Helper()
	r, err := l.tryBuild(goals...)
	if err != nil {
		l.t.Fatalf("build %v: %v\n%s", goals, err, l.log.String())
	}
	return r
}

func (l *mcoLab) file(target, rel string) []byte {
	l.t.Helper()
	b, err := os.ReadFile(filepath.Join(l.out, filepath.FromSlash(target), filepath.FromSlash(rel)))
	if err != nil {
		l.t.Fatal(err)
	}
	return b
}

// mcoFamily returns the executed targets of family (prefix "mco/", "ignition/"), sorted.
func mcoFamily(r *engine.Result, prefix string) []string {
	var out []string
	for _, n := range r.Built {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// TestMCORenderStandin runs the mco family against the stand-in binaries and the real
// templates and checks the chain: the work dir has every file the operator's flags name, the
// pools point at rendered-<pool>-<hash>, mco/base/<pool> holds a valid Ignition 3.4 config
// carrying the pull secret as /var/lib/kubelet/config.json and the kubelet CA equal to the
// Kubernetes CA, secrets are 0600, the pull secret reaches no log, and a second build
// executes nothing.
func TestMCORenderStandin(t *testing.T) {
	l := newMCOLab(t)
	r := l.build("mco")
	want := []string{"mco/base/master", "mco/base/worker", "mco/controller-bootstrap", "mco/inputs", "mco/operator-bootstrap"}
	if got := mcoFamily(r, "mco/"); !slices.Equal(got, want) {
		t.Fatalf("executed mco targets %v, want %v", got, want)
	}
	for _, rel := range []string{mco.RootCAFile, mco.KubeCAFile, mco.ClusterConfigFile, mco.PullSecretFile, mco.InfrastructureFile,
		mco.NetworkFile, mco.DNSFile, mco.ProxyFile, mco.FeatureGateFile, mco.ImageReferencesFile} {
		l.file("mco/inputs", rel)
	}
	// The kubelets' client CA: the kubernetes CA (the bootstrap kube-apiserver's kubelet client)
	// and the kube-apiserver-to-kubelet signer (the post-pivot one's), in that order.
	kubeCA := append(append([]byte{}, l.file("pki/ca/kubernetes", "tls.crt")...), l.file("pki/ca/kube-apiserver-to-kubelet-signer", "tls.crt")...)
	for _, pool := range mco.Pools {
		name, err := mco.RenderedName(l.file("mco/controller-bootstrap", mco.PoolFile(pool)))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := ignition.Parse(l.file("mco/base/"+pool, "config.ign"))
		if err != nil {
			t.Fatalf("%s config.ign: %v", pool, err)
		}
		if d := ignition.Duplicates(cfg); len(d) > 0 {
			t.Errorf("%s: duplicate entries %v", pool, d)
		}
		ps, err := ignition.FileContents(cfg, ignition.PathPullSecret)
		if err != nil || !bytes.Equal(bytes.TrimSpace(ps), []byte(mcoTestPullSecret)) {
			t.Errorf("%s: %s does not hold the pull secret (err %v)", pool, ignition.PathPullSecret, err)
		}
		mc, err := ignition.ParseMachineConfig(l.file("mco/base/"+pool, "machineconfig.yaml"))
		if err != nil || mc.Name != name {
			t.Errorf("%s: machineconfig.yaml is %v (err %v), want %s", pool, mc, err, name)
		}
		// The 99-<pool>-ssh MachineConfig is part of the bootstrap render, as bootkube.sh's.
		keyFile, err := os.ReadFile(l.cfg.Access.SSHKeyFile)
		if err != nil {
			t.Fatal(err)
		}
		sshKey := strings.TrimSpace(string(keyFile))
		found := false
		for _, u := range cfg.Passwd.Users {
			found = found || u.Name == "core" && slices.Contains(u.SSHAuthorizedKeys, types34.SSHAuthorizedKey(sshKey))
		}
		if !found {
			t.Errorf("%s: the rendered config lacks 99-%s-ssh's key for core", pool, pool)
		}
		if !bytes.Equal(l.file("mco/base/"+pool, "kubelet-ca.crt"), kubeCA) {
			t.Errorf("%s: kubelet-ca.crt is not pki/ca/kubernetes + pki/ca/kube-apiserver-to-kubelet-signer", pool)
		}
		for _, rel := range []string{"config.ign", "machineconfig.yaml"} {
			st, err := os.Stat(filepath.Join(l.out, "mco/base", pool, rel))
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("%s/%s: mode %v (err %v), want 0600", pool, rel, st.Mode(), err)
			}
		}
	}
	logs := 0
	filepath.WalkDir(filepath.Join(l.out, ".labbuild/log"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			logs++
			b, _ := os.ReadFile(p)
			if bytes.Contains(b, []byte("c2VjcmV0LXB1bGwtc2VjcmV0")) || bytes.Contains(b, []byte(mcoTestPullSecret)) {
				t.Errorf("log %s contains the pull secret", p)
			}
		}
		return nil
	})
	if logs == 0 {
		t.Error("no target logs under .labbuild/log; the pull-secret log check would be vacuous")
	}
	if r := l.build("mco"); len(r.Built) != 0 {
		t.Errorf("second build executed %v, want nothing", r.Built)
	}
}

// TestMCORenderFailures checks that a bad upstream fails the right target with an error that
// names the cause: image-references without a required tag (refused before running anything),
// and an operator that exits non-zero (its last output lines are in the error).
func TestMCORenderFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(l *mcoLab)
		failed  string
		wantErr string
	}{
		{"missing image tag", func(l *mcoLab) {
			l.imageRef = strings.Replace(mcoImageReferences(), "name: coredns", "name: not-coredns", 1)
		}, "mco/inputs", `no tag "coredns"`},
		{"operator exits 255", func(l *mcoLab) {
			l.operator = []byte("#!/bin/sh\necho 'I starting'\necho 'F Failed to find coredns in image references' >&2\nexit 255\n")
		}, "mco/operator-bootstrap", "Failed to find coredns in image references"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newMCOLab(t)
			tc.mutate(l)
			r, err := l.tryBuild("mco/base/master")
			if err == nil {
				t.Fatalf("build succeeded, want a failure of %s", tc.failed)
			}
			if r == nil || !slices.Contains(r.Failed, tc.failed) {
				t.Fatalf("failed targets %v, want %s (err %v)", r, tc.failed, err)
			}
			if msg := err.Error() + l.log.String(); !strings.Contains(msg, tc.wantErr) {
				t.Errorf("error does not mention %q:\n%s", tc.wantErr, msg)
			}
		})
	}
}
