package targets

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
)

// flowGraph returns every registered target for c by name.
func flowGraph(t *testing.T, c *lab.Config) map[string]*engine.Target {
	t.Helper()
	all := map[string]*engine.Target{}
	for _, f := range families {
		for _, x := range f.Targets(Lab{Config: c}) {
			all[x.Name] = x
		}
	}
	return all
}

// flowUpstream returns the transitive upstream closure of name.
func flowUpstream(all map[string]*engine.Target, name string) map[string]bool {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		x := all[n]
		if x == nil {
			return
		}
		for _, d := range x.Deps {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(name)
	return seen
}

// TestFlowClosure: every External resource a phase of `labbuild cluster` uses is upstream of
// it, in the registered graph, for each topology: the host checked before anything is made,
// the RHCOS image under every disk, the load balancer holding the API VIP before the bootstrap
// wait, the pivot acting on the haproxy/service it switches, and each phase's VMs.
func TestFlowClosure(t *testing.T) {
	for _, shape := range [][2]int{{3, 2}, {3, 0}, {1, 1}} {
		c := clusterConfig(shape[0], shape[1])
		t.Run(fmt.Sprintf("%d+%d", shape[0], shape[1]), func(t *testing.T) {
			all := flowGraph(t, c)
			vms := func(role string) []string {
				var out []string
				for _, n := range c.NodesByRole(role) {
					out = append(out, "libvirt/vm/"+n.Name, "libvirt/volume/"+n.Name)
				}
				return out
			}
			uses := map[string][]string{
				"cluster/bootstrap": append([]string{"host/preflight", "rhcos/image", "libvirt/network", "libvirt/pool", "haproxy/service", "host/firewall", "host/dns"}, vms(lab.RoleBootstrap)...),
				"cluster/masters":   vms(lab.RoleMaster),
				"cluster/pivot":     {"haproxy/service", "haproxy/config-post-pivot", "libvirt/vm/bootstrap"},
				"cluster/workers":   vms(lab.RoleWorker),
				"cluster/done":      {"host/dns", "kubeconfig/admin", "manifests/kubeadmin"},
				"haproxy/service":   {"libvirt/network", "host/preflight"},
			}
			for _, n := range c.Nodes {
				uses["libvirt/vm/"+n.Name] = []string{"host/preflight", "libvirt/network", "libvirt/volume/" + n.Name}
				uses["libvirt/volume/"+n.Name] = []string{"host/preflight", "libvirt/pool", "rhcos/image"}
			}
			for phase, want := range uses {
				if all[phase] == nil {
					t.Errorf("%s is not registered", phase)
					continue
				}
				up := flowUpstream(all, phase)
				for _, w := range want {
					if all[w] == nil {
						t.Errorf("%s uses %s, which is not registered", phase, w)
					} else if !up[w] {
						t.Errorf("%s uses %s, which is not upstream of it", phase, w)
					}
				}
			}
			// Every External target of the bring-up comes after host/preflight.
			for name, x := range all {
				if x.External && (strings.HasPrefix(name, "libvirt/") || strings.HasPrefix(name, "cluster/")) && !flowUpstream(all, name)["host/preflight"] {
					t.Errorf("%s does not come after host/preflight", name)
				}
			}
		})
	}
}

// TestFlowDryRunFresh is `labbuild -n cluster` in a fresh directory: the plan lists
// host/preflight, release/coreos-stream, rhcos/image, haproxy/service and every phase, each
// after what it needs.
func TestFlowDryRunFresh(t *testing.T) {
	c := clusterConfig(3, 2)
	dir := t.TempDir()
	c.Access.PullSecretFile, c.Access.SSHKeyFile = filepath.Join(dir, "ps.json"), filepath.Join(dir, "id.pub")
	os.WriteFile(c.Access.PullSecretFile, []byte(`{"auths":{}}`), 0o600)
	os.WriteFile(c.Access.SSHKeyFile, []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl x\n"), 0o644)
	var log strings.Builder
	res, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: t.TempDir(), Goals: []string{"cluster"}, DryRun: true, Stdout: &log, Stderr: &log,
		Now: func() time.Time { return time.Unix(1e9, 0) }})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var order []string
	for _, p := range res.Plan {
		order = append(order, p.Target)
	}
	seq := []string{"release/coreos-stream", "rhcos/image", "libvirt/volume/master-0", "libvirt/vm/master-0", "cluster/install/master-0", "cluster/masters"}
	seq3 := []string{"host/preflight", "host/firewall", "cluster/bootstrap"}
	seq4 := []string{"host/dns", "cluster/bootstrap", "cluster/done"}
	seq2 := []string{"host/preflight", "libvirt/network", "haproxy/service", "cluster/bootstrap", "cluster/masters", "cluster/etcd", "cluster/pivot", "cluster/workers", "cluster/converge", "cluster/done"}
	for _, s := range [][]string{seq, seq2, seq3, seq4} {
		for i, name := range s {
			at := slices.Index(order, name)
			if at < 0 {
				t.Errorf("plan lacks %s", name)
				continue
			}
			if i > 0 && slices.Index(order, s[i-1]) > at {
				t.Errorf("plan has %s after %s", s[i-1], name)
			}
		}
	}
}

// TestFlowDryRunMirror is `labbuild -n cluster` with `mirror: {enabled: true}` (issue 38 #11):
// the nodes pull the release from network.gateway:mirror.port (the ImageDigestMirrorSet and
// registries.conf name it), so the registry must serve and hold the payload before any node
// boots. Every libvirt/vm/<node> — the bootstrap, the masters, the workers, and on platform
// baremetal the workers Metal3 boots — has mirror/release, mirror/registry and
// mirror/listener upstream, and the plan lists them before the first VM. mirror/listener, the
// registry on network.gateway, comes after libvirt/network, which gives the host that address
// (before it, the registry could bind 127.0.0.1 only and every node's pull was refused); and
// mirror/release does not need the lab network (the mirror fills on a host with no lab).
func TestFlowDryRunMirror(t *testing.T) {
	for _, platform := range []string{"", lab.PlatformBaremetal} {
		t.Run("platform="+platform, func(t *testing.T) {
			c := clusterConfig(3, 2)
			c.Platform = platform
			dir := t.TempDir()
			c.Access.PullSecretFile, c.Access.SSHKeyFile = filepath.Join(dir, "ps.json"), filepath.Join(dir, "id.pub")
			os.WriteFile(c.Access.PullSecretFile, []byte(`{"auths":{}}`), 0o600)
			os.WriteFile(c.Access.SSHKeyFile, []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl x\n"), 0o644)
			c.Mirror = &lab.MirrorConfig{Enabled: true, Storage: filepath.Join(dir, "mirror"), Port: 5000}
			all := flowGraph(t, c)
			var vms []string
			for _, n := range c.Nodes {
				vm := "libvirt/vm/" + n.Name
				if all[vm] == nil {
					t.Fatalf("no %s", vm)
				}
				vms = append(vms, vm)
				up := flowUpstream(all, vm)
				for _, m := range []string{"mirror/registry", "mirror/release", "mirror/listener"} {
					if !up[m] {
						t.Errorf("%s does not depend on %s: the node would boot before the mirror serves the release it pulls", vm, m)
					}
				}
			}
			var log strings.Builder
			res, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: t.TempDir(), Goals: []string{"cluster"}, DryRun: true, Stdout: &log, Stderr: &log,
				Now: func() time.Time { return time.Unix(1e9, 0) }})
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			var order []string
			for _, p := range res.Plan {
				order = append(order, p.Target)
			}
			first := len(order)
			for _, vm := range vms {
				if i := slices.Index(order, vm); i < 0 {
					t.Errorf("plan lacks %s", vm)
				} else {
					first = min(first, i)
				}
			}
			for _, m := range []string{"mirror/registry", "mirror/release", "mirror/listener"} {
				if i := slices.Index(order, m); i < 0 || i > first {
					t.Errorf("plan %v: want %s before the first VM", order, m)
				}
			}
			if !flowUpstream(all, "mirror/listener")["libvirt/network"] {
				t.Error("mirror/listener does not depend on libvirt/network: on a fresh host the registry would start before the bridge address exists and serve 127.0.0.1 only")
			}
			if i, j := slices.Index(order, "libvirt/network"), slices.Index(order, "mirror/listener"); i < 0 || j < i {
				t.Errorf("plan %v: want mirror/listener after libvirt/network", order)
			}
			if flowUpstream(all, "mirror/release")["libvirt/network"] {
				t.Error("mirror/release depends on libvirt/network: filling the mirror alone would need the lab network")
			}
		})
	}
}
