// Package gather writes labbuild gather's bundle: what openshift-install gather bootstrap
// collects (installer data/data/bootstrap/files/usr/local/bin/installer-gather.sh and
// installer-masters-gather.sh) from the bootstrap and the masters over SSH — the journals of
// bootkube and the kubelet, every container's log, /var/log, the rendered assets, etcd's member
// list, the network facts — plus labbuild's own view of the lab (status --json), as one
// OUT/gather/<time>.tar.gz.
//
// A node that cannot be reached is named in the bundle's summary.txt and the others are still
// gathered. No secret enters the bundle: the collector drops the rendered assets' secrets as
// installer-gather.sh does, and every file that arrives is checked here again — one that holds
// a private key, the pull secret (any of its auths) or another secret the caller names is
// withheld and listed in the summary.
package gather

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// Script is the collector run on each node (sh -s ROLE, as root through sudo).
//
//go:embed gather.sh
var Script []byte

// Node is one node to gather from.
type Node struct {
	// Name and Role are the lab's (master-0, master).
	Name, Role string
	// Dial opens an SSH client to the node as core.
	Dial func(ctx context.Context) (*ssh.Client, error)
}

// Options say what to gather and where the bundle goes.
type Options struct {
	// Dir is where the bundle is written (OUT/gather), created if missing.
	Dir string
	// Now names the bundle (UTC, 20061102-150405) and dates its summary.
	Now time.Time
	// Nodes are gathered in order.
	Nodes []Node
	// Files are added at the bundle's top level as they are (status.json: labbuild status
	// --json), checked for secrets like the rest.
	Files map[string][]byte
	// Secrets are byte strings no file of the bundle may hold (the pull secret's auths, the
	// kubeadmin password, SSH private keys); empty ones are ignored.
	Secrets [][]byte
	// Progress receives one line per node as it is gathered.
	Progress io.Writer
	// NodeTimeout bounds one node's collection (default 5 minutes).
	NodeTimeout time.Duration
	// MaxFile is the largest file taken (default 256 MiB); a larger one is cut and noted.
	MaxFile int64
}

// Result is what went into the bundle.
type Result struct {
	// Path is the bundle written.
	Path string
	// Gathered are the nodes collected, with their file counts; Unreachable the nodes that
	// were not, with why.
	Gathered    map[string]int
	Unreachable map[string]string
	// Withheld are bundle paths left out because they held a secret, with which kind.
	Withheld map[string]string
}

// privateKeyMarkers are the PEM and OpenSSH armour lines of private keys.
var privateKeyMarkers = [][]byte{[]byte("PRIVATE KEY-----"), []byte("BEGIN OPENSSH PRIVATE KEY")}

// Gather collects every node and writes the bundle atomically (a temporary file renamed into
// place). It fails only when the bundle cannot be written; unreachable nodes are in Result.
func Gather(ctx context.Context, o Options) (*Result, error) {
	if o.NodeTimeout == 0 {
		o.NodeTimeout = 5 * time.Minute
	}
	if o.MaxFile == 0 {
		o.MaxFile = 256 << 20
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	stamp := o.Now.UTC().Format("20060102-150405")
	top := "labbuild-gather-" + stamp
	final := filepath.Join(o.Dir, stamp+".tar.gz")
	f, err := os.CreateTemp(o.Dir, ".gather-*.tmp")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	// 0600: a bundle is for the user and a support case, not for every local account.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	res := &Result{Path: final, Gathered: map[string]int{}, Unreachable: map[string]string{}, Withheld: map[string]string{}}
	var secrets [][]byte
	for _, s := range o.Secrets {
		if s = bytes.TrimSpace(s); len(s) >= 8 {
			secrets = append(secrets, s)
		}
	}
	write := func(name string, data []byte) error {
		if why := secretIn(data, secrets); why != "" {
			res.Withheld[name] = why
			return nil
		}
		h := &tar.Header{Name: path.Join(top, name), Mode: 0o644, Size: int64(len(data)), ModTime: o.Now, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	names := make([]string, 0, len(o.Files))
	for n := range o.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := write(n, o.Files[n]); err != nil {
			return nil, err
		}
	}
	for _, nd := range o.Nodes {
		start := time.Now()
		n, bytesIn, err := gatherNode(ctx, nd, o, func(name string, h *tar.Header, data []byte) error {
			return write(path.Join(nd.Name, name), data)
		})
		if err != nil {
			res.Unreachable[nd.Name] = err.Error()
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "gather: %s: NOT gathered: %v\n", nd.Name, err)
			}
			continue
		}
		res.Gathered[nd.Name] = n
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "gather: %s: %d files, %.1f MiB in %s\n", nd.Name, n, float64(bytesIn)/(1<<20), time.Since(start).Round(100*time.Millisecond))
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if err := write("summary.txt", summary(o, res)); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(f.Name(), final); err != nil {
		return nil, err
	}
	return res, nil
}

// gatherNode runs the collector on nd and passes each regular file of its tar stream to put.
func gatherNode(ctx context.Context, nd Node, o Options, put func(name string, h *tar.Header, data []byte) error) (files int, total int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, o.NodeTimeout)
	defer cancel()
	cl, err := nd.Dial(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	s, err := cl.NewSession()
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	s.Stdin = bytes.NewReader(Script)
	out, err := s.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	var stderr bytes.Buffer
	s.Stderr = &stderr
	role := nd.Role
	if role == "" {
		role = "node"
	}
	// As root: RHCOS gives core passwordless sudo (wheel); a node without sudo runs it as core.
	cmd := "if sudo -n true 2>/dev/null; then exec sudo -n sh -s " + role + "; else exec sh -s " + role + "; fi"
	if err := s.Start(cmd); err != nil {
		return 0, 0, err
	}
	go func() {
		<-ctx.Done()
		cl.Close() // ends the reads below
	}()
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return files, total, fmt.Errorf("reading the collector's output: %w (%s)", err, tail(stderr.String()))
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if name == "" || name == "." {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, o.MaxFile))
		if err != nil {
			return files, total, err
		}
		if err := put(name, h, data); err != nil {
			return files, total, err
		}
		files++
		total += int64(len(data))
	}
	// The collector's own exit status (tar warns on files that vanish) does not fail the node.
	s.Wait()
	if files == 0 {
		return 0, 0, fmt.Errorf("the collector sent nothing (%s)", tail(stderr.String()))
	}
	return files, total, nil
}

// secretIn says why data may not enter the bundle, or "".
func secretIn(data []byte, secrets [][]byte) string {
	for _, m := range privateKeyMarkers {
		if bytes.Contains(data, m) {
			return "holds a private key"
		}
	}
	for _, s := range secrets {
		if bytes.Contains(data, s) {
			return "holds a secret of the lab (pull secret, password or key)"
		}
	}
	return ""
}

func summary(o Options, r *Result) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "labbuild gather, %s\n\n", o.Now.UTC().Format(time.RFC3339))
	for _, nd := range o.Nodes {
		if n, ok := r.Gathered[nd.Name]; ok {
			fmt.Fprintf(&b, "gathered     %-12s %-9s %d files\n", nd.Name, nd.Role, n)
		}
	}
	for _, nd := range o.Nodes {
		if why, ok := r.Unreachable[nd.Name]; ok {
			fmt.Fprintf(&b, "NOT gathered %-12s %-9s %s\n", nd.Name, nd.Role, why)
		}
	}
	if len(r.Withheld) > 0 {
		fmt.Fprintf(&b, "\nwithheld (not in this bundle):\n")
		var ps []string
		for p := range r.Withheld {
			ps = append(ps, p)
		}
		sort.Strings(ps)
		for _, p := range ps {
			fmt.Fprintf(&b, "  %s: %s\n", p, r.Withheld[p])
		}
	}
	fmt.Fprintf(&b, "\nEach node's directory holds what openshift-install gather bootstrap collects: journals/\n"+
		"(bootkube, kubelet, crio), containers/ (every container's log), var/log/, rendered-assets/\n"+
		"(secrets removed), etcd/member-list.txt, network/ (addresses, routes, listening sockets).\n")
	return []byte(b.String())
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = "…" + s[len(s)-300:]
	}
	if s == "" {
		return "no error output"
	}
	return s
}
