package rehearsal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// StartContainer runs static pod container c in node nd as the kubelet runs a hostNetwork
// pod's container: its command line, environment (env added) and volumes, kept running
// (restartPolicy Always). bins maps a program to the host binary that plays it; shell wraps a
// bash container's argv (rig.containerShell: its own PID namespace, /bin/sh being bash). It
// returns nil when c's program is not here (the container is a stand-in, not started).
func StartContainer(nd *Node, c Container, bins map[string]string, shell func([]string) []string, env []string) (*Kept, error) {
	bin, ok := bins[c.Program]
	if !ok {
		return nil, nil
	}
	// CRI-O creates a missing hostPath as a directory (the MCO's keepalived pod's
	// /etc/keepalived, which its monitor writes keepalived.conf into).
	for _, hp := range c.HostPaths {
		if _, err := os.Lstat(filepath.Join(nd.Root, hp)); os.IsNotExist(err) && !strings.HasPrefix(hp, "/var/lib/kubelet/pods/") {
			if err := nd.Run(context.Background(), "mkdir", nil, "mkdir", "-p", hp); err != nil {
				return nil, err
			}
		}
	}
	argv, cenv := append([]string{bin}, c.Args...), append(slices.Clone(c.Env), env...)
	if c.Program == "bash" && shell != nil {
		argv, cenv = shell(argv), append(cenv, "HOME=/")
	}
	return nd.KeepProgram(c.Pod+"-"+c.Name, cenv, c.Binds, argv...)
}

// PodRunner is the kubelet's static pod source on a node for the programs the rig has: each
// Sync reads the node's PodManifestDir and starts the containers of a manifest that appeared,
// stops (and waits for) those of one that went, and restarts those of one that changed, as the
// kubelet does (pkg/kubelet/config file source: a changed file is a new pod). It writes what runs
// as CRI's ListContainers would report it, for the crictl stand-in (SNOStandinBin): a single
// node's bootstrap-in-place.sh stops etcd by moving its manifest and waits with `crictl ps`
// until no etcd container runs.
type PodRunner struct {
	Node *Node
	// Bins and Shell are StartContainer's.
	Bins  map[string]string
	Shell func([]string) []string
	// Logf receives what it starts and stops.
	Logf func(format string, args ...any)

	mu      sync.Mutex
	pods    map[string]*runnerPod // by manifest file
	written string                // the CRI state last written
}

type runnerPod struct {
	sum        [sha256.Size]byte
	kept       []*Kept
	containers []string // names of the containers it runs
}

// StopGrace is how long a stopped container may take to exit on SIGTERM before SIGKILL: the
// static pods' terminationGracePeriodSeconds default (30 s).
const StopGrace = 30 * time.Second

// CRIStatePath is the node path where PodRunner writes the running containers, as `crictl ps
// -o json` prints them ({"containers": [{"metadata": {"name": ...}, "state": ...}]}).
const CRIStatePath = "/var/lib/rehearsal/crictl-ps.json"

// Run syncs every second until ctx ends; a failed sync is logged and retried.
func (p *PodRunner) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := p.Sync(); err != nil {
			p.Logf("pod runner on %s: %v", p.Node.Name, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// Sync brings the running containers in line with the manifests once.
func (p *PodRunner) Sync() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pods == nil {
		p.pods = map[string]*runnerPod{}
	}
	dir := filepath.Join(p.Node.Root, PodManifestDir)
	ents, _ := os.ReadDir(dir)
	sums := map[string][sha256.Size]byte{}
	for _, e := range ents {
		n := e.Name()
		// Regular files only: a manifest moved away inside the node may leave an overlay
		// whiteout (a character device) in the root's upper layer.
		if !e.Type().IsRegular() || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".json")) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		sums[n] = sha256.Sum256(b)
	}
	for f, rp := range p.pods {
		if s, ok := sums[f]; ok && s == rp.sum {
			continue
		}
		for _, k := range rp.kept {
			k.Stop(StopGrace)
		}
		delete(p.pods, f)
		p.Logf("pod runner on %s: stopped %s (%s)", p.Node.Name, f, strings.Join(rp.containers, ", "))
	}
	var all []Container
	if len(sums) > len(p.pods) {
		var err error
		if all, err = StaticPods(p.Node.Root); err != nil {
			return err
		}
	}
	for f, s := range sums {
		if p.pods[f] != nil {
			continue
		}
		rp := &runnerPod{sum: s}
		for _, c := range all {
			if c.File != f {
				continue
			}
			k, err := StartContainer(p.Node, c, p.Bins, p.Shell, nil)
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if k != nil {
				rp.kept = append(rp.kept, k)
				rp.containers = append(rp.containers, c.Name)
			} else if why, ok := NotRun[c.Program]; ok {
				p.Logf("pod runner on %s: %s container %s not run: %s", p.Node.Name, f, c.Name, why)
			}
		}
		p.pods[f] = rp
		if len(rp.containers) > 0 {
			p.Logf("pod runner on %s: started %s (%s)", p.Node.Name, f, strings.Join(rp.containers, ", "))
		}
	}
	return p.writeCRIState()
}

// writeCRIState writes CRIStatePath in the node, through its own mount namespace (its /var
// is an overlay), when what runs changed.
func (p *PodRunner) writeCRIState() error {
	type ctr struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		State string `json:"state"`
	}
	out := struct {
		Containers []ctr `json:"containers"`
	}{Containers: []ctr{}}
	var names []string
	for _, rp := range p.pods {
		names = append(names, rp.containers...)
	}
	sort.Strings(names)
	for _, n := range names {
		var c ctr
		c.Metadata.Name, c.State = n, "CONTAINER_RUNNING"
		out.Containers = append(out.Containers, c)
	}
	b, _ := json.Marshal(out)
	if string(b) == p.written {
		return nil
	}
	cmd, err := p.Node.Command("crictl-state", nil, nil, "sh", "-c", `mkdir -p "$(dirname "$0")" && cat > "$0.tmp" && mv "$0.tmp" "$0"`, CRIStatePath)
	if err != nil {
		return err
	}
	cmd.Stdin = bytes.NewReader(b)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("writing %s: %w", CRIStatePath, err)
	}
	p.written = string(b)
	return nil
}
