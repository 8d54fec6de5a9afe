package main

import (
	"context"
)

// verb is one labbuild subcommand, declared once in verbs: its usage line, a paragraph of
// help, examples, its own flags, whether it has a JSON output, and its code (verb_<name>.go).
type verb struct {
	usage    string
	short    string
	long     string
	examples []string
	// flags are the verb's own flags, by the name newFlags defines them with: `labbuild help
	// VERB` lists them before the global flags (help.go), and completion offers them with the
	// global ones (verb_completion.go). Every flag parses with every verb.
	flags []string
	// json says the verb has a JSON output, so --json is honoured; with any other verb it is
	// refused (run). build's is the plan's (-n --json); graph's is --format json.
	json bool
	run  func(ctx context.Context, c *cli, args []string) error
}

// verbs is the table of verbs: `labbuild help` lists them sorted.
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
			flags: []string{"jobs", "keep-going", "dry-run", "always-make", "explain", "debug", "regenerate", "restart"},
			json:  true,
			run:   runBuild,
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
			flags: []string{"format", "by", "all-edges", "output", "all"},
			run:   runGraph,
		},
		"list": {
			usage:    "labbuild list [--json] [--all] [target|family ...]",
			short:    "list targets with their doc lines",
			long:     "Lists targets, one a line, with their doc line. --json adds deps, reads and files.",
			examples: []string{"labbuild list pki", "labbuild list --json --all | jq -r '.[].name'"},
			flags:    []string{"all"},
			json:     true,
			run:      runList,
		},
		"explain": {
			usage: "labbuild explain [--json] TARGET",
			short: "say whether TARGET is up to date, and why not",
			long: `Shows TARGET's state (up to date, or what would run and why), its declared inputs with their
current digests, and its upstream targets. Changes nothing.`,
			examples: []string{"labbuild explain pki/cert/kube-apiserver", "labbuild explain --json ignition/master-1"},
			json:     true,
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
			flags:    []string{"cache", "trim"},
			run:      runClean,
		},
		"destroy": {
			usage:    "labbuild destroy [-n] [--json] [--mirror] [target|family ...]",
			short:    "remove what labbuild created in libvirt and on the host, from its records",
			long:     "Removes exactly what labbuild's records name (VMs, volumes, pool, network, haproxy) in reverse dependency order. Each line says what happened: destroyed (it existed and is gone), already absent (removed outside labbuild; the record goes), forgot (nothing of its own outside the output directory), NOT destroyed (unreachable or refused: it stays recorded, exit 1), kept (what a NOT destroyed target sits on stays recorded too). Safe to rerun. --json prints the same lists. The release mirror's storage (mirror.storage, shared by every lab of the host) is kept unless --mirror is given; the plan says which.",
			examples: []string{"labbuild destroy", "labbuild destroy -n", "labbuild destroy libvirt/vm/worker-1", "labbuild destroy --mirror"},
			flags:    []string{"dry-run"},
			json:     true,
			run:      runDestroy,
		},
		"init": {
			usage:    "labbuild init [-f lab.yaml]",
			short:    "write a commented lab.yaml with every default",
			long:     "Writes the embedded default lab config, commented, to lab.yaml (or -f): a lab of the newest release labbuild builds (OpenShift 4.22). Another release, OpenShift or OKD, is another release.image; init says how. It refuses to overwrite.",
			examples: []string{"labbuild init && $EDITOR lab.yaml"},
			run:      runInit,
		},
		"config": {
			usage:    "labbuild config [--json]",
			short:    "print the effective lab config (validated; secrets are never printed)",
			long:     "Prints the effective config after defaults, as YAML, after validating it. The config holds paths to secrets, never their content.",
			examples: []string{"labbuild config", "labbuild -f other.yaml config"},
			json:     true,
			run:      runConfig,
		},
		"certs": {
			usage:    "labbuild certs [--json]",
			short:    "list every built certificate: subject, SANs, EKUs, issuer, time left",
			long:     "Reads the built certificates under the output directory and prints one line each.",
			examples: []string{"labbuild certs", "labbuild certs --json"},
			json:     true,
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
			json:     true,
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
			json:     true,
			run:      runVersion,
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
