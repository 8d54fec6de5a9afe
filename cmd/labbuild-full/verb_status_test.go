package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets"
	"github.com/labbuild/labbuild/targets/kube"
)

// TestStatusJSON: `status --json` is data, per target: state, short key, build time, the next
// build's action and the changed fields, compared with testdata/status.golden.json (keys and
// times checked for shape, then masked; -update rewrites it). Built, then an edit of pki.caDays
// makes pki/ca/root stale with the change named; pki/ca/kubernetes is missing.
func TestStatusJSON(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	dir := t.TempDir()
	lab := filepath.Join(dir, "my-lab.yaml")
	write := func(s string) {
		if err := os.WriteFile(lab, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cli := func(args ...string) []byte {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"-C", dir, "-f", "my-lab.yaml"}, args...), &out, &errb)
		os.Chdir(wd)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out.String(), errb.String())
		}
		return out.Bytes()
	}
	write("pki: {keyAlgorithm: ECDSA-P256}\n")
	start := time.Now().Add(-time.Second)
	cli("-q", "pki/ca/root")
	end := time.Now().Add(time.Second)
	keyRe := regexp.MustCompile(`^[0-9a-f]{12}$`)
	mask := func(b []byte) any {
		t.Helper()
		var rep statusReport
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("status --json: %v\n%s", err, b)
		}
		for i := range rep.Targets {
			ts := &rep.Targets[i]
			if ts.Key != "" {
				if !keyRe.MatchString(ts.Key) {
					t.Errorf("%s: key %q is not 12 hex digits", ts.Name, ts.Key)
				}
				ts.Key = "<key>"
			}
			if ts.BuiltAt != "" {
				at, err := time.Parse(time.RFC3339, ts.BuiltAt)
				if err != nil || at.Before(start.Truncate(time.Second)) || at.After(end) {
					t.Errorf("%s: builtAt %q not within the build (%v)", ts.Name, ts.BuiltAt, err)
				}
				ts.BuiltAt = "<time>"
			}
		}
		return rep
	}
	got := []any{mask(cli("status", "--json", "pki/ca/root", "pki/ca/kubernetes"))}
	write("pki: {keyAlgorithm: ECDSA-P256, caDays: 3000}\n")
	got = append(got, mask(cli("status", "--json", "pki/ca/root")))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(got); err != nil {
		t.Fatal(err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	golden := filepath.Join("testdata", "status.golden.json")
	if *update {
		if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(b, '\n'), want) {
		t.Errorf("status --json differs from %s (-update rewrites it):\n%s", golden, b)
	}
}

// TestRootCauseNamesLabFile: with the pull secret gone after the lab was written, the read-only
// verbs (explain, status --json) name the cause with the -f file and line that set the field,
// never a generic "lab.yaml", and `status --json` gives every blocked target that one cause.
func TestRootCauseNamesLabFile(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "id.pub"), []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH4Vj7Yz0n7uK2pQvJmH1x6Xn2mC3f0l5S0b3Jc8yF1q lab\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lab := "pki: {keyAlgorithm: ECDSA-P256}\naccess:\n  pullSecretFile: ./gone.json\n  sshKeyFile: ./id.pub\n"
	if err := os.WriteFile(filepath.Join(dir, "my-lab.yaml"), []byte(lab), 0o644); err != nil {
		t.Fatal(err)
	}
	// cli returns stdout and stderr: the release gate warns on stderr that it cannot read the
	// payload (this machine does not reach quay.io), which is not part of status --json.
	cli := func(args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"-C", dir, "-f", "my-lab.yaml"}, args...), &out, &errb)
		os.Chdir(wd)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
	cause := "cannot read access.pullSecretFile (my-lab.yaml:3) names " + filepath.Join(dir, "gone.json") + ": no such file or directory"
	if out, errs := cli("explain", "manifests/cluster/pull-secret"); !strings.Contains(out+errs, "error: "+cause) {
		t.Errorf("explain does not name the cause with my-lab.yaml:3:\n%s%s", out, errs)
	}
	var rep statusReport
	out, _ := cli("status", "--json", "release", "manifests")
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	blocked := 0
	for _, ts := range rep.Targets {
		if ts.State != engine.StateBlocked {
			continue
		}
		blocked++
		if !strings.Contains(ts.Error, cause) {
			t.Errorf("%s: error %q does not name the cause", ts.Name, ts.Error)
		}
	}
	if blocked < 5 || rep.Config != "my-lab.yaml" {
		t.Errorf("status --json: %d blocked targets, config %q; want the release and its dependents blocked, my-lab.yaml", blocked, rep.Config)
	}
}

// TestWriteClusterStatus: `labbuild status` prints each stage the observation holds and one
// row per node; an API that is not ready hides the stages (targets.ObserveCluster asks them
// only of a ready API) and shows why.
func TestWriteClusterStatus(t *testing.T) {
	nodes := []targets.ClusterNodeObservation{
		{Name: "bootstrap", Role: lab.RoleBootstrap, VM: "off"},
		{Name: "master-0", Role: lab.RoleMaster, VM: "running", Kubernetes: "Ready", PendingCSRs: 1},
		{Name: "worker-0", Role: lab.RoleWorker, VM: "unknown"},
	}
	tests := []struct {
		name      string
		obs       targets.ClusterObservation
		want, not []string
	}{
		{"converged", targets.ClusterObservation{APIVIP: "192.168.126.10", BootstrapComplete: true, Etcd: &targets.ClusterEtcd{Ready: 1, Masters: 1},
			Operators: &kube.Convergence{Total: 2, Available: 2, Version: "True"}, Nodes: nodes},
			[]string{"api ready through 192.168.126.10:6443", "bootstrap complete (kube-system/bootstrap)", "etcd Ready on 1/1 masters",
				"operators 2/2 ClusterOperators Available", "NODE ROLE VM KUBERNETES PENDING CSRS", "bootstrap bootstrap off - 0",
				"master-0 master running Ready 1", "worker-0 worker unknown - 0"}, nil},
		{"bootstrapping", targets.ClusterObservation{APIVIP: "198.18.0.10", CVO: &targets.ClusterCVO{Status: "no ClusterVersion version yet"}, Nodes: nodes},
			[]string{"api ready through 198.18.0.10:6443", "bootstrap in progress; CVO reporting: false (no ClusterVersion version yet)"},
			[]string{"etcd", "operators"}},
		{"api down", targets.ClusterObservation{APIVIP: "198.18.0.10", APIErr: errors.New("connection refused"), Nodes: nodes},
			[]string{"api not ready through 198.18.0.10:6443: connection refused", "master-0 master running Ready 1"},
			[]string{"bootstrap complete", "etcd", "operators"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := writeClusterStatus(&b, &tc.obs); err != nil {
				t.Fatal(err)
			}
			norm := strings.Join(strings.Fields(strings.ReplaceAll(b.String(), "\n", " | ")), " ")
			for _, w := range tc.want {
				if !strings.Contains(norm, w) {
					t.Errorf("lacks %q:\n%s", w, b.String())
				}
			}
			for _, w := range tc.not {
				if strings.Contains(norm, w) {
					t.Errorf("shows %q:\n%s", w, b.String())
				}
			}
		})
	}
}
