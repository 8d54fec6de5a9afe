package targets

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/render/mco"
)

// The mco family: the node OS render (openshift-the-hard-way stage 08's MCO part,
// ../shared/spec/mco-bootstrap.md, target-graph.md §3.7). It runs the release's own
// machine-config-operator and machine-config-controller bootstrap programs (release/mco:
// bin/ and the /etc/mcc/templates tree) on a work dir labbuild renders:
//
//	mco/inputs               the work dir (render/mco.WorkDir): CAs, cluster objects, pull
//	                         secret, FeatureGate with status, image-references
//	mco/operator-bootstrap   `machine-config-operator bootstrap` → ControllerConfig, pools, ...
//	mco/controller-bootstrap `machine-config-controller bootstrap` → machine-pools/,
//	                         machine-configs/rendered-<pool>-<hash>.yaml, controller-config/
//	mco/base/<pool>          config.ign (the pool's Ignition), machineconfig.yaml (the rendered
//	                         MachineConfig), kubelet-ca.crt (ControllerConfig
//	                         kubeAPIServerServingCAData, which the MCS serves)
//
// The split gives early cutoff where mco-bootstrap.md says the render does not change: a new
// release digest or infrastructure name changes the ControllerConfig but not the rendered
// configs, so mco/base/* and the node Ignition stay as they are.

// mcoRoleReads are the derived count reads (the install-config's controlPlane replicas and the
// topologies), see roleCountReads.
func mcoRoleReads(c *lab.Config) []string { return roleCountReads(c) }

// mcoWriteFile writes one output, 0600 when secret.
func mcoWriteFile(s *engine.Step, rel string, data []byte, secret bool) error {
	mode := fs.FileMode(0o644)
	if secret {
		mode = 0o600
	}
	return s.WriteFile(rel, data, mode)
}

// mcoRun runs program (an absolute path) with args, records its command line and output in
// the target's log, and on failure returns an error with the output's last lines.
func mcoRun(ctx context.Context, s *engine.Step, program string, args []string) error {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		// TODO(mco podman): run the machine-config-operator image with podman on other hosts
		// (and when the lab config asks for it); the release's binaries are linux/amd64.
		return fmt.Errorf("%s: the release's %s is a linux/amd64 program and this host is %s/%s; running it under podman is not implemented yet",
			s.Target().Name, path.Base(program), runtime.GOOS, runtime.GOARCH)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	s.Logf("$ %s %s", path.Base(program), strings.Join(args, " "))
	err := cmd.Run()
	s.Log().Write(out.Bytes())
	if err != nil {
		return fmt.Errorf("%s: %s bootstrap failed: %w; last output lines:\n%s\n(full output in the target's log)",
			s.Target().Name, path.Base(program), err, mco.Tail(out.Bytes(), 15))
	}
	return nil
}

// mcoCollect writes every regular file under dir as an output at prefix/<rel>; files whose
// content holds the pull secret (the Secret copy, rendered MachineConfigs) are 0600.
func mcoCollect(s *engine.Step, dir string, secret func(rel string) bool) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		rel = filepath.ToSlash(rel)
		return mcoWriteFile(s, rel, b, secret(rel))
	})
	return n, err
}

// mcoDepDir returns the directory of upstream dep whose outputs start with prefix + "/"
// (the templates tree of release/mco), found through one of its files.
func mcoDepDir(s *engine.Step, dep, prefix string) (string, error) {
	files, err := s.DepFiles(dep)
	if err != nil {
		return "", err
	}
	for _, f := range files {
		if strings.HasPrefix(f, prefix+"/") {
			p, err := s.DepPath(dep, f)
			if err != nil {
				return "", err
			}
			return strings.TrimSuffix(p, filepath.FromSlash(f)) + prefix, nil
		}
	}
	return "", fmt.Errorf("%s: %s wrote no %s/ tree (the machine-config-operator image's /etc/mcc/templates); rebuild it: labbuild -B %s",
		s.Target().Name, dep, prefix, dep)
}

func mcoTargets(c *lab.Config) []*engine.Target {
	reads := append(append([]string{lab.ClusterName, lab.ClusterBaseDomain, lab.NetworkClusterNetwork, lab.NetworkHostPrefix,
		lab.NetworkServiceNetwork, lab.NetworkMachineNetwork}, releaseRowReads...),
		mcoRoleReads(c)...)
	reads = addReads(reads, vipPlatformReads(c)...) // in-cluster: platform BareMetal, on-prem templates
	var nodeNames []string
	for _, n := range c.Nodes {
		nodeNames = append(nodeNames, n.Name)
	}
	ts := []*engine.Target{
		{
			Name:  "mco/inputs",
			Doc:   "the MCO bootstrap work dir: root and kube-apiserver CAs, cluster-config-v1, pull-secret Secret, Infrastructure, Network, DNS, Proxy, FeatureGate, image-references",
			Deps:  append([]string{"pki/ca/root", "pki/bundle/kubelet-client-ca", "manifests/ids", "release/image-references", "manifests/cluster/featuregate"}, append(mirrorClusterDeps(c, append(mirrorSourceDeps, "mirror/credentials")...), trustDeps(c)...)...),
			Reads: addReads(reads, mirrorClusterReads(c)...),
			Files: []string{lab.AccessPullSecretFile},
			// Version 2: the cluster's FeatureGate (manifests/cluster/featuregate) and the
			// release's required tags (issue 37).
			Version: 2,
			Run: func(ctx context.Context, s *engine.Step) error {
				in := mco.Inputs{}
				var err error
				str := func(p string, into *string) {
					if err == nil {
						*into, err = s.String(p)
					}
				}
				str(lab.ClusterName, &in.ClusterName)
				str(lab.ClusterBaseDomain, &in.BaseDomain)
				str(lab.NetworkClusterNetwork, &in.ClusterNetwork)
				str(lab.NetworkServiceNetwork, &in.ServiceNetwork)
				str(lab.NetworkMachineNetwork, &in.MachineNetwork)
				if err != nil {
					return err
				}
				row, err := releaseRow(s)
				if err != nil {
					return err
				}
				in.RequiredTags = row.MCORequiredTags
				fg, err := depFiles(s, "manifests/cluster/featuregate", "")
				if err != nil {
					return err
				}
				for _, b := range fg { // one file
					in.FeatureGate = b
				}
				if in.HostPrefix, err = intValue(s, lab.NetworkHostPrefix); err != nil {
					return err
				}
				if in.Masters, in.Workers, err = roleCounts(s, nodeNames); err != nil {
					return err
				}
				if in.PullSecret, err = s.File(lab.AccessPullSecretFile); err != nil {
					return err
				}
				if err := lab.CheckPullSecret(in.PullSecret, lab.AccessPullSecretFile); err != nil {
					return err
				}
				if err := mcoTrustInputs(c, s, &in); err != nil { // targets/mirror.go
					return fmt.Errorf("%s: %w", s.Target().Name, err)
				}
				id, err := s.DepFile("manifests/ids", "infrastructure-name")
				if err != nil {
					return err
				}
				in.InfraID = strings.TrimSpace(string(id))
				if in.BareMetal, err = vipBareMetal(s); err != nil {
					return err
				}
				if in.RootCA, err = s.DepFile("pki/ca/root", "tls.crt"); err != nil {
					return err
				}
				// The kubelets' client CA: the bootstrap's and the post-pivot kube-apiserver's
				// kubelet client signers (pki.go pkiBundles).
				if in.KubeCA, err = s.DepFile("pki/bundle/kubelet-client-ca", "ca-bundle.crt"); err != nil {
					return err
				}
				if in.ImageReferences, err = s.DepFile("release/image-references", "image-references"); err != nil {
					return err
				}
				files, err := mco.WorkDir(in)
				if err != nil {
					return fmt.Errorf("%s: %w", s.Target().Name, err)
				}
				for _, f := range files {
					if err := mcoWriteFile(s, f.Path, f.Data, f.Secret); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			Name:    "mco/operator-bootstrap",
			Doc:     "runs the release's `machine-config-operator bootstrap`: ControllerConfig, master/worker pools, pull-secret copy, bootstrap pod",
			Deps:    []string{"mco/inputs", "release/mco", "release/resolve"},
			Reads:   []string{lab.ReleaseVersion},
			Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error {
				version, err := s.String(lab.ReleaseVersion)
				if err != nil {
					return err
				}
				release, err := depPullspec(s, "release/resolve")
				if err != nil {
					return err
				}
				bin, err := s.DepPath("release/mco", "bin/machine-config-operator")
				if err != nil {
					return err
				}
				// Any work-dir file locates the work dir (the dep's output directory).
				ref, err := s.DepPath("mco/inputs", mco.ImageReferencesFile)
				if err != nil {
					return err
				}
				work := filepath.Dir(ref)
				scratch, err := s.Scratch()
				if err != nil {
					return err
				}
				dest := filepath.Join(scratch, "mco-bootstrap")
				if err := mcoRun(ctx, s, bin, mco.OperatorArgs(work, dest, release, version)); err != nil {
					return err
				}
				n, err := mcoCollect(s, dest, func(rel string) bool { return rel == mco.OperatorPullSecret })
				if err == nil && n == 0 {
					err = fmt.Errorf("%s: machine-config-operator bootstrap wrote nothing to --dest-dir", s.Target().Name)
				}
				return err
			},
		},
		{
			Name:  "mco/controller-bootstrap",
			Doc:   "runs the release's `machine-config-controller bootstrap` over the templates: rendered-<pool>-<hash> MachineConfigs, pools, ControllerConfig",
			Deps:  append([]string{"mco/operator-bootstrap", "mco/inputs", "release/mco", "manifests/cluster/ssh"}, mirrorClusterDeps(c, "manifests/cluster/mirror")...),
			Reads: append([]string{lab.ReleaseVersion}, releaseRowReads...),
			// Version 2: image-references in the manifest dir where the release's bootkube.sh
			// puts it (issue 37).
			Version: 2,
			Run: func(ctx context.Context, s *engine.Step) error {
				version, err := s.String(lab.ReleaseVersion)
				if err != nil {
					return err
				}
				row, err := releaseRow(s)
				if err != nil {
					return err
				}
				bin, err := s.DepPath("release/mco", "bin/machine-config-controller")
				if err != nil {
					return err
				}
				templates, err := mcoDepDir(s, "release/mco", "templates")
				if err != nil {
					return err
				}
				scratch, err := s.Scratch()
				if err != nil {
					return err
				}
				// The --manifest-dir is flat: stage 1's bootstrap/manifests/* plus the
				// FeatureGate, as bootkube.sh copies them to /etc/mcc/bootstrap.
				mdir := filepath.Join(scratch, "mcc-bootstrap")
				if err := os.MkdirAll(mdir, 0o700); err != nil {
					return err
				}
				files, err := s.DepFiles("mco/operator-bootstrap")
				if err != nil {
					return err
				}
				copyIn := func(dep, rel string) error {
					b, err := s.DepFile(dep, rel)
					if err != nil {
						return err
					}
					return os.WriteFile(filepath.Join(mdir, path.Base(rel)), b, 0o600)
				}
				for _, rel := range files {
					if path.Dir(rel) == mco.OperatorManifestDir {
						if err := copyIn("mco/operator-bootstrap", rel); err != nil {
							return err
						}
					}
				}
				if err := copyIn("mco/inputs", mco.FeatureGateFile); err != nil {
					return err
				}
				// From 4.22 bootkube.sh also copies image-references there (render/releases
				// MCCImageReferences): the controller decodes its ImageStream.
				if row.MCCImageReferences {
					if err := copyIn("mco/inputs", mco.ImageReferencesFile); err != nil {
						return err
					}
				}
				// The 99-<pool>-ssh MachineConfigs, as bootkube.sh's `cp openshift/*
				// /etc/mcc/bootstrap/` (../shared/spec/mco-bootstrap.md): the bootstrap render
				// then equals what the in-cluster MCO renders after the pivot.
				ssh, err := s.DepFiles("manifests/cluster/ssh")
				if err != nil {
					return err
				}
				for _, rel := range ssh {
					if err := copyIn("manifests/cluster/ssh", rel); err != nil {
						return err
					}
				}
				// The mirror's ImageDigestMirrorSet, as bootkube.sh's `cp manifests/*
				// /etc/mcc/bootstrap/`: the controller renders 99-<pool>-generated-registries
				// (registries.conf) from it.
				if c.MirrorOn() {
					if err := copyIn("manifests/cluster/mirror", manifests.ImageDigestMirrorSetFile); err != nil {
						return err
					}
				}
				pull, err := s.DepPath("mco/operator-bootstrap", mco.OperatorPullSecret)
				if err != nil {
					return err
				}
				dest := filepath.Join(scratch, "mcs-bootstrap")
				if err := mcoRun(ctx, s, bin, mco.ControllerArgs(templates, mdir, dest, pull, version)); err != nil {
					return err
				}
				// Rendered MachineConfigs embed the pull secret (/var/lib/kubelet/config.json).
				_, err = mcoCollect(s, dest, func(rel string) bool { return strings.HasPrefix(rel, "machine-configs/") })
				if err != nil {
					return err
				}
				for _, p := range mco.Pools {
					if !s.Wrote(mco.PoolFile(p)) {
						return fmt.Errorf("%s: machine-config-controller bootstrap wrote no %s (are the pools in its --manifest-dir?)", s.Target().Name, mco.PoolFile(p))
					}
				}
				return nil
			},
		},
	}
	for _, pool := range mco.Pools {
		ts = append(ts, &engine.Target{
			Name:    "mco/base/" + pool,
			Doc:     "the " + pool + " pool's rendered MachineConfig and its Ignition 3.4 config (spec.config), plus the kubelet CA the MCS serves",
			Deps:    []string{"mco/controller-bootstrap"},
			Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error {
				pd, err := s.DepFile("mco/controller-bootstrap", mco.PoolFile(pool))
				if err != nil {
					return err
				}
				name, err := mco.RenderedName(pd)
				if err != nil {
					return fmt.Errorf("%s: %w", s.Target().Name, err)
				}
				doc, err := s.DepFile("mco/controller-bootstrap", mco.MachineConfigFile(name))
				if err != nil {
					return err
				}
				mc, err := ignition.ParseMachineConfig(doc)
				if err != nil {
					return fmt.Errorf("%s: %s: %w", s.Target().Name, mco.MachineConfigFile(name), err)
				}
				raw, err := mc.ConfigJSON()
				if err != nil {
					return fmt.Errorf("%s: %w", s.Target().Name, err)
				}
				ccDoc, err := s.DepFile("mco/controller-bootstrap", mco.ControllerConfigFile)
				if err != nil {
					return err
				}
				ca, err := ignition.KubeletCAFromControllerConfig(ccDoc)
				if err != nil {
					return fmt.Errorf("%s: %w", s.Target().Name, err)
				}
				s.Logf("%s: %d files, %d units, %d bytes", name, len(mc.Config.Storage.Files), len(mc.Config.Systemd.Units), len(raw))
				if err := s.WriteFile("config.ign", raw, 0o600); err != nil {
					return err
				}
				if err := s.WriteFile("machineconfig.yaml", doc, 0o600); err != nil {
					return err
				}
				return s.WriteFile("kubelet-ca.crt", ca, 0o644)
			},
		})
	}
	return ts
}

func init() {
	Register(Family{Name: "mco", Doc: "node OS render by the release's machine-config-operator/controller bootstrap (stage 08)",
		Targets: func(l Lab) []*engine.Target {
			return mcoTargets(l.Config)
		}})
}

// mcoTrustInputs gives the MCO bootstrap the mirror and the lab's trust bundle: with a mirror,
// the pull secret with its auth (the nodes' /var/lib/kubelet/config.json) and
// imageDigestSources; with a trust bundle, the bundle (cluster-config-v1, user-ca-bundle,
// Proxy trustedCA, and so the nodes' anchor).
func mcoTrustInputs(c *lab.Config, s *engine.Step, in *mco.Inputs) error {
	var err error
	if c.MirrorOn() {
		if in.PullSecret, err = mirrorPullSecret(c, s, bytes.TrimSpace(in.PullSecret)); err != nil {
			return err
		}
		if in.ImageDigestSources, err = mirrorSources(s); err != nil {
			return err
		}
	}
	in.AdditionalTrustBundle, err = trustBundle(c, s)
	return err
}
