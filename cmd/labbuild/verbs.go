package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/targets"
)

// verb is one labbuild subcommand: its usage line, a paragraph of help, examples, and code.
type verb struct {
	usage    string
	short    string
	long     string
	examples []string
	run      func(ctx context.Context, c *cli, args []string) error
}

var verbs map[string]verb

func init() {
	verbs = map[string]verb{
		"build": {
			usage: "labbuild [flags] [target|family ...]",
			short: "build targets (the default verb)",
			long: `Builds the named targets and what they need. A family name (pki) builds every target of
the family; a prefix (manifests/static-pods) every target under it. With no target, every file
artifact through ignition is built and no libvirt object is touched; External targets (libvirt,
haproxy/service, cluster) must be named. Each target is keyed by what it declares it reads, so a
second run does nothing and an edit rebuilds only what it affects.`,
			examples: []string{
				"labbuild                       # every file artifact, through ignition",
				"labbuild ignition/master-0     # one Ignition config and what it needs",
				"labbuild -n --explain pki      # what would rebuild in pki, and why",
				"labbuild -j4 -k cluster        # the whole lab, keep going past failures",
				"labbuild -B kubeconfig         # rebuild every kubeconfig",
			},
			run: runBuild,
		},
		"graph": {
			usage: "labbuild graph [--format dot|svg|png|tree|json] [--by target|family] [--all-edges] [--output file] [target|family ...]",
			short: "draw the dependency graph, coloured by state",
			long: `Draws the selected targets (default: the default goal; --all: every target) grouped by family,
each filled with its state: up to date, cached (restored from the store, not run), stale (an
input changed), missing (never built), failed (the last attempt failed) and blocked (cannot be
evaluated now, e.g. a file the config names is missing); a legend counts them. Edges point from
a dependency to its dependent; only the transitive reduction is drawn unless --all-edges.
--by family draws one node per family with edge counts: the stage pipeline. svg and png are
drawn with Graphviz's dot (Debian package graphviz); on a terminal they go to
labbuild-graph.png (or .svg) unless --output names a file.`,
			examples: []string{
				"labbuild graph --format png                  # writes labbuild-graph.png",
				"labbuild graph --by family --format svg --output families.svg",
				"labbuild graph --format tree ignition/master-0",
				"labbuild graph --all --all-edges | dot -Tsvg > all.svg",
			},
			run: runGraph,
		},
		"list": {
			usage:    "labbuild list [--json] [--all] [target|family ...]",
			short:    "list targets with their doc lines",
			long:     "Lists targets, one a line, with their doc line. --json adds deps, reads and files.",
			examples: []string{"labbuild list pki", "labbuild list --json --all | jq -r '.[].name'"},
			run:      runList,
		},
		"explain": {
			usage: "labbuild explain [--json] TARGET",
			short: "say whether TARGET is up to date, and why not",
			long: `Shows TARGET's state (up to date, or what would run and why), its declared inputs with their
current digests, and its upstream targets. Changes nothing.`,
			examples: []string{"labbuild explain pki/cert/kube-apiserver", "labbuild explain --json ignition/master-1"},
			run:      runExplain,
		},
		"clean": {
			usage: "labbuild clean [--cache | --trim] [target|family ...]",
			short: "remove built files (the store stays, so a rebuild restores them)",
			long: `Removes the outputs and state of the selected targets (default: all). The content store
stays, so the next build restores everything (keys included) without running anything. --cache
removes the store too: sticky keys and passwords are then generated anew. --trim only trims the
store (entries unused for 30 days, then the oldest past 10 GiB; keys are kept), as every build
does once a day. libvirt objects are left alone: use labbuild destroy.`,
			examples: []string{"labbuild clean", "labbuild clean ignition", "labbuild clean --trim", "labbuild clean --cache"},
			run:      runClean,
		},
		"destroy": {
			usage:    "labbuild destroy [-n] [--json] [--mirror] [target|family ...]",
			short:    "remove what labbuild created in libvirt and on the host, from its records",
			long:     "Removes exactly what labbuild's records name (VMs, volumes, pool, network, haproxy) in reverse dependency order. Each line says what happened: destroyed (it existed and is gone), already absent (removed outside labbuild; the record goes), forgot (nothing of its own outside the output directory), NOT destroyed (unreachable or refused: it stays recorded, exit 1), kept (what a NOT destroyed target sits on stays recorded too). Safe to rerun. --json prints the same lists. The release mirror's storage (mirror.storage, shared by every lab of the host) is kept unless --mirror is given; the plan says which.",
			examples: []string{"labbuild destroy", "labbuild destroy -n", "labbuild destroy libvirt/vm/worker-1", "labbuild destroy --mirror"},
			run:      runDestroy,
		},
		"init": {
			usage:    "labbuild init [-f lab.yaml]",
			short:    "write a commented lab.yaml with every default",
			long:     "Writes the embedded default lab config, commented, to lab.yaml (or -f). It refuses to overwrite.",
			examples: []string{"labbuild init && $EDITOR lab.yaml"},
			run:      runInit,
		},
		"config": {
			usage:    "labbuild config [--json]",
			short:    "print the effective lab config (validated; secrets are never printed)",
			long:     "Prints the effective config after defaults, as YAML, after validating it. The config holds paths to secrets, never their content.",
			examples: []string{"labbuild config", "labbuild -f other.yaml config"},
			run:      runConfig,
		},
		"certs": {
			usage:    "labbuild certs [--json]",
			short:    "list every built certificate: subject, SANs, EKUs, issuer, time left",
			long:     "Reads the built certificates under the output directory and prints one line each.",
			examples: []string{"labbuild certs", "labbuild certs --json"},
			run:      runCerts,
		},
		"log": {
			usage: "labbuild log TARGET",
			short: "print a target's last log (its last run; FAILED and the error at the end)",
			long: `Prints what TARGET's last run wrote to its log (OUT/.labbuild/log/TARGET.log): the commands,
downloads and waits it did, and when it failed, FAILED: and the error as the last line. -v on a
build streams every running target's log lines instead, prefixed with the target's name.`,
			examples: []string{"labbuild log rhcos/image", "labbuild -v cluster"},
			run:      runLog,
		},
		"status": {
			usage: "labbuild status [--json [target|family ...]]",
			short: "report the running cluster: API, bootstrap, etcd, operators, and each node's VM, Ready and CSRs",
			long: `Asks the cluster (through the admin kubeconfig the build wrote) and the hypervisor where the lab
stands: the API through the VIP, bootstrap complete or not, etcd, ClusterOperators, and per node its
role, VM state, Ready condition and pending CSRs. An unreachable API is reported, not an error.
Changes nothing; use it between the phases of labbuild cluster.
--json prints data instead, per target (every target, or those named): its state ("up to date",
cached, stale, missing, failed, blocked), short action key, when it was built, what the next
build would do and why, and for External targets whether the object exists and has drifted.
The schema is in docs/usage.md.`,
			examples: []string{"labbuild status", "labbuild -f lab.yaml status"},
			run:      runStatus,
		},
		"ssh": {
			usage: "labbuild ssh NODE [-- COMMAND ...]",
			short: "log in to a node as core (or run COMMAND there), as kcli ssh",
			long: `Opens an SSH session to NODE's address as user core, the login Ignition configures on every
RHCOS node, with your SSH agent (SSH_AUTH_SOCK) or the private half of access.sshKeyFile (its name
without .pub) or ~/.ssh/id_ed25519, id_ecdsa, id_rsa. Without COMMAND it is an interactive login
(a pty of your terminal's size); with one it runs it and exits with its status. The node's host
key is recorded on first use in OUT/.labbuild/known_hosts (0600); a node that later offers
another key is refused with the line to remove (a reinstalled node has new keys).`,
			examples: []string{
				"labbuild ssh master-0",
				"labbuild ssh bootstrap -- journalctl -b -f -u bootkube.service",
				"labbuild ssh master-0 -- sudo crictl ps -a",
			},
			run: runSSH,
		},
		"console": {
			usage: "labbuild console NODE",
			short: "attach to a node VM's serial console (Ctrl-] leaves), as virsh console",
			long: `Attaches to NODE's VM serial console over the libvirt connection (libvirt.uri; a remote
qemu+ssh:// URI works as well): the firmware, GRUB, kernel and Ignition messages and a login
prompt, and your keys to the guest. Ctrl-] leaves, as in virsh console. Only one client may hold a
console: close another virsh console first.`,
			examples: []string{"labbuild console bootstrap", "labbuild console master-1"},
			run:      runConsole,
		},
		"gather": {
			usage: "labbuild gather [NODE ...]",
			short: "collect a lab's logs into OUT/gather/<time>.tar.gz, as openshift-install gather bootstrap",
			long: `Logs in to each node as core (as labbuild ssh does; default: the bootstrap and every master) and
collects what openshift-install gather bootstrap collects: the journals of bootkube, the kubelet
and CRI-O, every container's log (the static pods' among them), /var/log, the rendered assets
(/opt/openshift, the static pod manifests), etcd's member list and the network facts (addresses,
routes, listening sockets), plus labbuild status --json. A progress line per node; a node that
cannot be reached is named in the bundle's summary.txt and the others are still gathered.
Secrets never enter the bundle: a file holding a private key, the pull secret or the kubeadmin
password is withheld and listed in summary.txt. The bundle is 0600.`,
			examples: []string{
				"labbuild gather                       # bootstrap and masters",
				"labbuild gather master-1 worker-0",
				"tar tzf out/gather/*.tar.gz | head",
			},
			run: runGather,
		},
		"version": {
			usage:    "labbuild version",
			short:    "print the version",
			examples: []string{"labbuild version", "labbuild --version"},
			run: func(ctx context.Context, c *cli, args []string) error {
				if c.json {
					return encodeJSON(c.stdout, map[string]string{"version": versionString()})
				}
				fmt.Fprintln(c.stdout, "labbuild", versionString())
				return nil
			},
		},
		"completion": {
			usage:    "labbuild completion bash|zsh|fish",
			short:    "print a shell completion script",
			long:     "Prints a completion script that completes verbs, flags, families and target names.",
			examples: []string{"source <(labbuild completion bash)", "labbuild completion fish > ~/.config/fish/completions/labbuild.fish"},
			run:      runCompletion,
		},
		"help": {usage: "labbuild help [verb]", short: "show help for labbuild or a verb"},
	}
}

func printHelp(w io.Writer, name string, fs *pflag.FlagSet) {
	if v, ok := verbs[name]; ok && name != "" {
		fmt.Fprintf(w, "Usage: %s\n\n", v.usage)
		if v.long != "" {
			fmt.Fprintf(w, "%s\n\n", v.long)
		} else {
			fmt.Fprintf(w, "%s\n\n", v.short)
		}
		if len(v.examples) > 0 {
			fmt.Fprintf(w, "Examples:\n")
			for _, e := range v.examples {
				fmt.Fprintf(w, "  %s\n", e)
			}
			fmt.Fprintln(w)
		}
		printVerbFlags(w, fs, name)
		return
	}
	b := verbs["build"]
	fmt.Fprintf(w, "labbuild builds an OpenShift 4 lab on libvirt the hard way, as content-hashed targets.\n\n")
	fmt.Fprintf(w, "Usage: %s\n       labbuild VERB [flags] [args]\n\n%s\n\nVerbs:\n", b.usage, b.long)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, n := range verbNames() {
		fmt.Fprintf(tw, "  %s\t%s\n", n, verbs[n].short)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nExamples:\n")
	for _, e := range b.examples {
		fmt.Fprintf(w, "  %s\n", e)
	}
	fmt.Fprintf(w, "\nFlags:\n%s\nRun 'labbuild help VERB' for a verb's help. Exit status: 0 ok, 1 a target failed, 2 bad usage or lab config.\n", fs.FlagUsages())
}

func runBuild(ctx context.Context, c *cli, args []string) error {
	o, err := c.options(args)
	if err != nil {
		return err
	}
	if err := c.checkFiles(&o); err != nil {
		return err
	}
	o.Record = c.stamp.recorder()
	pd := newProgress(c)
	if pd != nil && !c.dryRun {
		o.Reporter, o.Stderr = pd, pd.Stderr(o.Stderr)
		if c.verbose {
			ls := &logStream{w: o.Stderr}
			o.LogTee = ls.For
		}
	}
	var endTimes func()
	if !c.dryRun {
		o.Reporter = boundHeapOnWork(o.Reporter)    // the collector on once targets run: memory.go
		o.Reporter, endTimes = profiled(o.Reporter) // LABBUILD_TIMES, labels: see profile.go
	}
	res, err := engine.Build(ctx, o)
	if endTimes != nil {
		endTimes()
	}
	if pd != nil {
		pd.Close() // the summary line below takes the status area's place
	}
	if res == nil {
		return err
	}
	if c.dryRun {
		if c.json {
			if e := printPlanJSON(c, res); e != nil {
				return e
			}
			return err
		}
		printPlan(c, res)
		return err
	}
	if len(res.Built)+len(res.Restored)+len(res.Failed) == 0 && err == nil {
		c.noWork(res) // and the front's stamp: stamp.go
	} else {
		fmt.Fprintf(c.stdout, "labbuild: %s\n", res.Summary())
	}
	if err == nil {
		// The end of `labbuild cluster`, as openshift-install ends: KUBECONFIG, console URL,
		// where the kubeadmin password is.
		c.stdout.Write(targets.ClusterSummary(o.OutDir, res))
	}
	return err
}

// load is engine.Load of c.options(goals): the lab's targets as a verb sees them before it
// plans or builds anything. o is returned with the error too (its OutDir, for messages).
func (c *cli) load(goals []string) (*engine.Project, engine.Options, error) {
	o, err := c.options(goals)
	if err != nil {
		return nil, o, err
	}
	p, err := engine.Load(o)
	return p, o, err
}

// allTargets returns every target's name in the project's order (graph --all, status --json
// with no goals).
func (c *cli) allTargets() ([]string, error) {
	p, _, err := c.load(nil)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(p.Targets))
	for _, t := range p.Targets {
		names = append(names, t.Name)
	}
	return names, nil
}

// status computes, without building, each selected target's state for graph colouring and
// explain: a dry run.
func (c *cli) status(ctx context.Context, goals []string, inputs bool) (*engine.Project, *engine.Result, engine.Options, error) {
	p, o, err := c.load(goals)
	if err != nil {
		return nil, nil, o, err
	}
	// Explain (inputs) turns off the null-build fast path, which skips computing them.
	// KeepGoing: a target that cannot be evaluated blocks its dependents, not every other target.
	// The dry run's errors (why a target is blocked) are kept for explain.
	c.dryErr.Reset()
	o.DryRun, o.KeepGoing, o.Explain, o.Stdout, o.Stderr = true, true, inputs, io.Discard, &c.dryErr
	res, err := engine.Build(ctx, o)
	if res == nil && err != nil {
		return nil, nil, o, err
	}
	return p, res, o, nil
}

type listItem struct {
	Name     string   `json:"name"`
	Doc      string   `json:"doc"`
	Deps     []string `json:"deps"`
	Reads    []string `json:"reads"`
	Files    []string `json:"files"`
	External bool     `json:"external,omitempty"`
	Sticky   bool     `json:"sticky,omitempty"`
}

func runList(ctx context.Context, c *cli, args []string) error {
	p, _, err := c.load(nil)
	if err != nil {
		return err
	}
	var ids []int
	if len(args) > 0 {
		if ids, err = p.Select(args); err != nil {
			return err
		}
	} else {
		for i := range p.Targets {
			ids = append(ids, i)
		}
	}
	sort.Slice(ids, func(a, b int) bool { return p.Targets[ids[a]].Name < p.Targets[ids[b]].Name })
	var items []listItem
	for _, i := range ids {
		t := p.Targets[i]
		items = append(items, listItem{Name: t.Name, Doc: t.Doc, Deps: nonNil(t.Deps), Reads: nonNil(t.Reads), Files: nonNil(t.Files), External: t.External, Sticky: t.Sticky})
	}
	if c.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if items == nil {
			items = []listItem{}
		}
		return enc.Encode(items)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	for _, it := range items {
		mark := ""
		if it.External {
			mark = " (external)"
		}
		fmt.Fprintf(tw, "%s\t%s%s\n", it.Name, it.Doc, mark)
	}
	return tw.Flush()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func runClean(ctx context.Context, c *cli, args []string) error {
	o, err := c.options(args)
	if err != nil {
		return err
	}
	if c.trim {
		st, err := engine.TrimCache(o, engine.TrimAge, engine.TrimBytes)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "labbuild: trimmed the store: %d entries and %d objects (%d bytes) removed, %d entries (%d bytes) kept\n",
			st.EntriesRemoved, st.ObjectsRemoved, st.BytesRemoved, st.EntriesKept, st.BytesKept)
		return nil
	}
	names, err := engine.Clean(ctx, o, engine.CleanOptions{Cache: c.cacheToo})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "labbuild: cleaned %d targets\n", len(names))
	if c.cacheToo {
		fmt.Fprintf(c.stdout, "labbuild: removed the content store: the next build generates new keys\n")
	}
	return nil
}

func runDestroy(ctx context.Context, c *cli, args []string) error {
	o, err := c.options(args)
	if err != nil {
		return err
	}
	rep, err := engine.Destroy(ctx, o)
	if rep == nil {
		return err
	}
	if c.json {
		if jerr := encodeJSON(c.stdout, destroyJSON(rep)); jerr != nil {
			return jerr
		}
		return err
	}
	for _, n := range rep.Planned {
		fmt.Fprintf(c.stdout, "would destroy %s\n", n)
	}
	if len(rep.Planned) > 0 {
		fmt.Fprintln(c.stdout, rep.PlanCount().Terraform()) // the one plan summary
	}
	// In the order handled; "destroyed" only for what existed and was removed.
	for _, n := range rep.Destroyed {
		fmt.Fprintf(c.stdout, "destroyed %s\n", n)
	}
	for _, n := range rep.Absent {
		fmt.Fprintf(c.stdout, "already absent %s (removed outside labbuild); record forgotten\n", n)
	}
	for _, n := range rep.Forgotten {
		fmt.Fprintf(c.stdout, "forgot %s (nothing of its own outside %s)\n", n, o.OutDir)
	}
	for _, n := range rep.Failed {
		fmt.Fprintf(c.stdout, "NOT destroyed %s (still recorded)\n", n)
	}
	for _, n := range rep.Kept {
		fmt.Fprintf(c.stdout, "kept %s (still recorded: %s uses it)\n", n, rep.KeptFor[n])
	}
	if slices.Contains(rep.Planned, "mirror/registry") || slices.Contains(rep.Destroyed, "mirror/registry") || slices.Contains(rep.Absent, "mirror/registry") {
		if note := targets.MirrorDestroyNote(c.cfg, c.dryRun); note != "" {
			fmt.Fprintln(c.stdout, note)
		}
	}
	if len(rep.Planned)+len(rep.Destroyed)+len(rep.Absent)+len(rep.Forgotten)+len(rep.Failed)+len(rep.Kept) == 0 {
		if err == nil {
			fmt.Fprintln(c.stdout, "labbuild: nothing recorded to destroy")
		}
		return err
	}
	if !c.dryRun {
		line := fmt.Sprintf("labbuild: %d destroyed, %d already absent, %d records forgotten", len(rep.Destroyed), len(rep.Absent), len(rep.Forgotten))
		if len(rep.Failed) > 0 {
			line += fmt.Sprintf(", %d NOT destroyed, %d kept (fix the cause on stderr and run labbuild destroy again)", len(rep.Failed), len(rep.Kept))
		}
		fmt.Fprintln(c.stdout, line)
	}
	if err != nil && len(rep.Failed) > 0 {
		// One line per target and its cause, then exit 1 without printing them again.
		for _, l := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(c.stderr, "labbuild: %s\n", l)
		}
		return &engine.BuildError{Failed: rep.Failed}
	}
	return err
}

// destroyJSON is destroy --json: every list present, empty rather than null.
func destroyJSON(r *engine.DestroyReport) engine.DestroyReport {
	return engine.DestroyReport{Destroyed: nonNil(r.Destroyed), Absent: nonNil(r.Absent), Forgotten: nonNil(r.Forgotten),
		Failed: nonNil(r.Failed), Kept: nonNil(r.Kept), KeptFor: r.KeptFor, Planned: r.Planned}
}

func runInit(ctx context.Context, c *cli, args []string) error {
	path := c.file
	if path == "" {
		path = "lab.yaml"
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if os.IsExist(err) {
		return usagef("init: %s exists; remove it or pass -f other.yaml", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(targets.DefaultLabYAML()); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "labbuild: wrote %s; edit it, then run labbuild\n", path)
	return nil
}

func runConfig(ctx context.Context, c *cli, args []string) error {
	o, err := c.options(nil)
	if err != nil {
		return err
	}
	cfg, ok := o.Config.(*targets.Config)
	if !ok {
		return usagef("config: no lab config with --synthetic")
	}
	if c.json {
		b, err := cfg.RedactedJSON()
		if err != nil {
			return err
		}
		_, err = c.stdout.Write(append(b, '\n'))
		return err
	}
	b, err := cfg.Redacted()
	if err != nil {
		return err
	}
	_, err = c.stdout.Write(b)
	return err
}

func runStatus(ctx context.Context, c *cli, args []string) error {
	o, err := c.options(nil)
	if err != nil {
		return err
	}
	cfg, ok := o.Config.(*targets.Config)
	if !ok {
		return usagef("status: no lab config with --synthetic")
	}
	if !c.json {
		return targets.ClusterStatus(ctx, cfg, o.OutDir, c.stdout)
	}
	rep, err := c.statusJSON(ctx, args)
	if err != nil {
		return err
	}
	return encodeJSON(c.stdout, rep)
}

func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runCerts(ctx context.Context, c *cli, args []string) error {
	now := time.Now()
	if c.now != "" {
		t, err := time.Parse(time.RFC3339, c.now)
		if err != nil {
			return usagef("--now: %v", err)
		}
		now = t
	}
	return targets.CertReport(c.outDir, now, c.json, c.stdout)
}
