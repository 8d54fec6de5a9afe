// Package engine runs labbuild's targets: it keys each one by its declared inputs, skips what
// is up to date, restores what the content store already holds, and runs the rest in
// dependency order on every CPU.
//
// A Target is a value, declared once (labbuild's OpenShift families live in package targets),
// in the manner of an x/tools Analyzer or a kubeadm phase. It names what it reads — config
// fields by path, files named by config fields, and upstream targets — and a Run function that
// writes its outputs through a Step. The engine keys each target by those declared inputs, so
// nothing undeclared can change its output and everything declared that changes rebuilds it.
//
// The engine knows nothing of OpenShift, Kubernetes or libvirt: it imports only graph/ (the
// DAG) and cache/ (digests, store, state, lock), and its tests run on synthetic targets.
// Files: target.go (Target, Family), step.go (a Run's view), options.go (Options, Result),
// project.go (Load, Select), build.go (Build, the output directory), verdict.go (the one
// verdict: is a target up to date, and why; verdict_sticky.go its part for sticky secrets,
// which are never made anew unasked), reason.go (State, Reason), plan.go (Action,
// PlanItem, PlanCount), key.go (the one key computation), fastpath.go (the null-build fast
// path), sched.go (the scheduler), runner.go (a build's runner and a dry run's), exec.go
// (running, restoring and recording a target), clean.go (Clean, Destroy). Its tests build
// the rig's synthetic graph (internal/rig/synthetic).
package engine

import (
	"context"
	"fmt"
	"path"
	"strings"
)

// Target is one buildable artifact.
type Target struct {
	// Name is "family/name", lowercase, slash-separated: "pki/etcd-server", "ignition/master-0".
	Name string
	// Doc is one line shown by `labbuild list` and `labbuild graph --format tree`.
	Doc string
	// Deps are the upstream targets whose outputs this target reads (Step.DepFile).
	Deps []string
	// Reads are the config fields this target reads, by path ("network.apiVIP",
	// "nodes.master-1.ip", "sizes.worker"). A path may name a subtree; its canonical JSON is
	// hashed. Step.Value refuses any path not listed here.
	Reads []string
	// Files are config fields whose value is a path to a file this target reads
	// ("access.pullSecretFile"). The file's content digest, not its path, is a key input.
	Files []string
	// Version is the recipe version; bump it when Run changes what it writes, so cache entries
	// made by the old recipe stop matching.
	Version int
	// OutDir is where outputs are materialized, relative to the output directory. Empty means
	// Name, so outputs land in out/<family>/<name>/. Several targets may share an OutDir
	// (ignition/* write out/ignition/<node>.ign) as long as their file names differ.
	OutDir string
	// Sticky marks generated secrets (private keys, passwords): once built, the output is
	// restored from the store, never re-run by -B or trimmed away. Only a change of the
	// target's own inputs, or an explicit --regenerate, makes a new one.
	Sticky bool
	// Gate marks a check (host/preflight) whose output is the same bytes whenever it passes:
	// it fails the build or changes nothing downstream. A dry run so plans it without counting
	// it as an upstream change of its dependents (early cutoff, known in advance).
	Gate bool
	// External marks targets whose real result lives outside the filesystem (libvirt objects,
	// host services, a running cluster). Their outputs are a record of what they made. They are
	// never part of the default goal; a user names them (`labbuild cluster`).
	External bool
	// Run writes the target's outputs through s. It gets its declared values, files and
	// upstream outputs from s and nothing else. Required.
	Run func(ctx context.Context, s *Step) error
	// Probe, when set, observes the real state outside the filesystem (a libvirt domain, a
	// cluster) and says whether it matches the recorded outputs. It runs whenever the target's
	// files are otherwise up to date; any action but Keep makes the target run.
	Probe func(ctx context.Context, s *Step) (ProbeResult, error)
	// Destroy, when set, undoes what Run made outside the filesystem, using the recorded
	// outputs (Step.Prev), and says what it found: Destroyed (the object existed and is gone
	// now), AlreadyAbsent (someone removed it before), or RecordOnly (nothing of the target's
	// own lives outside the files: a check, a cache shared by every lab). An error means the
	// object could not be reached or removed: destroy then keeps the record and exits 1. It
	// must be safe to call again after it succeeded. Nil means RecordOnly.
	Destroy func(ctx context.Context, s *Step) (DestroyOutcome, error)
}

// DestroyOutcome is what a Target's Destroy found, so that `labbuild destroy` says
// "destroyed" only for objects that existed and were removed.
type DestroyOutcome int

// The outcomes of a Destroy that succeeded.
const (
	// Destroyed: the recorded object existed and was removed.
	Destroyed DestroyOutcome = iota
	// AlreadyAbsent: the recorded object was already gone (removed by hand, or with what held it).
	AlreadyAbsent
	// RecordOnly: the target made nothing of its own outside the filesystem; only its record goes.
	RecordOnly
)

// ProbeResult is what a Probe saw: the action needed to make real state match the declared
// one (Keep, Create, Update or Replace), and a one-line reason naming the drifted object or
// field. It must not contain secrets.
type ProbeResult struct {
	Action Action
	Reason string
}

// Family returns the family of target name: the part before the first slash ("pki" for
// "pki/etcd-server"), or name itself when it has none. It is the one place a family is derived
// from a name (the engine's orphans, the CLI's graph and profiles, Target.Family).
func Family(name string) string {
	if i := strings.IndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return name
}

// Family returns t's family (Family of its name).
func (t *Target) Family() string { return Family(t.Name) }

// Dir returns the directory, relative to the output directory, where t's outputs appear.
func (t *Target) Dir() string {
	if t.OutDir != "" {
		return t.OutDir
	}
	return t.Name
}

// validName reports whether name is family/name: two or more slash-separated segments of
// lowercase letters, digits, '.' and '-', each starting with a letter or digit. (A hand-written
// check: a regexp here cost a millisecond per thousand targets in every null build.)
func validName(name string) bool {
	segs, start := 0, true
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '/':
			if start {
				return false
			}
			segs++
			start = true
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			start = false
		case c == '.' || c == '-':
			if start {
				return false
			}
		default:
			return false
		}
	}
	return !start && segs >= 1
}

// Check reports declaration mistakes: a malformed name, a missing Run, duplicate reads.
func (t *Target) Check() error {
	if !validName(t.Name) {
		return fmt.Errorf("target %q: name must be family/name in lowercase letters, digits, '.' and '-'", t.Name)
	}
	if t.Run == nil {
		return fmt.Errorf("%s: no Run function", t.Name)
	}
	if t.OutDir != "" && (path.IsAbs(t.OutDir) || path.Clean(t.OutDir) != t.OutDir || strings.HasPrefix(t.OutDir, ".")) {
		return fmt.Errorf("%s: OutDir %q must be a clean relative path", t.Name, t.OutDir)
	}
	// Duplicates among Reads and Files together, without building their concatenation.
	nr := len(t.Reads)
	at := func(i int) string {
		if i < nr {
			return t.Reads[i]
		}
		return t.Files[i-nr]
	}
	for i := 1; i < nr+len(t.Files); i++ {
		for j := 0; j < i; j++ {
			if at(i) == at(j) {
				return fmt.Errorf("%s: %q declared twice", t.Name, at(i))
			}
		}
	}
	return nil
}
