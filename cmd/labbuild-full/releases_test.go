package main

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/internal/rig/payload"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/render/ignition"
)

// TestReleaseScripts runs testdata/releases: the payload decides the release (issue 37). Its
// labs are the sample payloads of every supported release — $LAB_418, $LAB_420 and $LAB_422 in
// one OCI layout, so that they differ by release.image alone, as a mirror holding several
// releases serves them; $LAB_OKD with no pull secret file; $LAB_416, a payload of version
// 4.16.3 — each with the MCO stand-in built for its release.
func TestReleaseScripts(t *testing.T) {
	shared := testenv.RequireShared(t)
	ocp := testenv.StartSampleReleases(t, true, payload.Options{Release: "4.18"}, payload.Options{Release: "4.20"}, payload.Options{Release: "4.22"})
	okd := testenv.StartSampleReleases(t, true, payload.Options{Release: "okd-4.22"})[0]
	old := testenv.StartSampleReleases(t, false, payload.Options{Release: "4.22", Version: "4.16.3"})[0]
	dir := t.TempDir()
	labs := map[string]string{}
	for name, sr := range map[string]testenv.SampleRelease{"LAB_418": ocp[0], "LAB_420": ocp[1], "LAB_422": ocp[2], "LAB_OKD": okd, "LAB_416": old} {
		access := map[string]any{"sshKeyFile": sr.SSHKeyFile}
		if sr.PullSecretFile != "" {
			access["pullSecretFile"] = sr.PullSecretFile
		}
		b, err := yaml.Marshal(map[string]any{
			"release": map[string]any{"image": sr.Image, "mirrors": sr.Mirrors},
			"access":  access,
			"pki":     map[string]any{"keyAlgorithm": "ECDSA-P256"}, // fast keys; not under test
		})
		if err != nil {
			t.Fatal(err)
		}
		labs[name] = filepath.Join(dir, strings.ToLower(name)+".yaml")
		if err := os.WriteFile(labs[name], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/releases",
		UpdateScripts: *update,
		Setup: func(e *testscript.Env) error {
			e.Setenv("HOME", e.WorkDir) // no ~/.pull-secret.json: the OKD lab has none
			for k, v := range labs {
				e.Setenv(k, v)
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// ignitions OUT: every node Ignition of OUT/ignition passes Ignition's own parser
			// of its declared version (render/ignition Validate: 3.4.0 or 3.5.0) with an empty
			// report; prints each file's version.
			"ignitions": func(ts *testscript.TestScript, neg bool, args []string) {
				files, _ := filepath.Glob(ts.MkAbs(filepath.Join(args[0], "ignition", "*.ign")))
				if len(files) < 6 {
					ts.Fatalf("%d Ignition files in %s/ignition, want the bootstrap's, three masters' and two workers'", len(files), args[0])
				}
				for _, f := range files {
					b, err := os.ReadFile(f)
					ts.Check(err)
					if err := ignition.Validate(b); err != nil {
						ts.Fatalf("%s: %v", filepath.Base(f), err)
					}
					cfg, err := ignition.Parse(b)
					ts.Check(err)
					ts.Logf("%s: Ignition %s, valid", filepath.Base(f), cfg.Ignition.Version)
				}
			},
			// crds OUT RELEASE: release/crds wrote the fixture's selection of RELEASE
			// (../shared/fixtures/[versions/<r>/]release/crds; OKD's -OKD variants in place of
			// the -Default ones), less what excluded.txt says the CVO excludes, which must be
			// N lines when a third argument N is given.
			"crds": func(ts *testscript.TestScript, neg bool, args []string) {
				out, rel := ts.MkAbs(args[0]), args[1]
				want := fixtureCRDs(ts, shared, rel)
				got := crdNames(ts, filepath.Join(out, "release/crds/crds"))
				var excluded []string
				if b, err := os.ReadFile(filepath.Join(out, "release/crds/excluded.txt")); err == nil {
					for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
						if n, _, ok := strings.Cut(l, ": "); ok {
							excluded = append(excluded, n)
						}
					}
				}
				all := append(slices.Clone(got), excluded...)
				sort.Strings(all)
				if !slices.Equal(all, want) {
					ts.Fatalf("%s: CRDs written and excluded %v\nthe fixture's selection %v", rel, all, want)
				}
				if len(args) > 2 && args[2] != strconv.Itoa(len(excluded)) {
					ts.Fatalf("%s: %d excluded (%v), want %s", rel, len(excluded), excluded, args[2])
				}
				ts.Logf("%s: %d CRDs selected as the fixture, %d applied, %d excluded by the CVO", rel, len(all), len(got), len(excluded))
			},
			// nowhere DIR WORD: no file labbuild wrote under DIR contains WORD. The payload's
			// own bytes copied verbatim are not looked at: its CRDs (ImageDigestMirrorSet's
			// description names registry.redhat.io as an example), the MCO binaries, and the
			// cache's content-addressed copies of what is checked in place.
			"nowhere": func(ts *testscript.TestScript, neg bool, args []string) {
				var in []string
				root := ts.MkAbs(args[0])
				filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
					if err != nil {
						return err
					}
					rel, _ := filepath.Rel(root, p)
					if d.IsDir() {
						if rel == filepath.Join(".labbuild", "cache") || rel == filepath.Join("release", "mco", "bin") {
							return filepath.SkipDir
						}
						return nil
					}
					if strings.HasSuffix(p, ".crd.yaml") {
						return nil
					}
					if b, _ := os.ReadFile(p); strings.Contains(string(b), args[1]) {
						in = append(in, p)
					}
					return nil
				})
				if len(in) > 0 {
					ts.Fatalf("%s in %s", args[1], strings.Join(in, "\n"))
				}
			},
		},
	})
}

// fixtureCRDs are the config-api CRD file names of release's fixture selection.
func fixtureCRDs(ts *testscript.TestScript, shared, release string) []string {
	root := map[string]string{"4.18": "fixtures/release/crds", "4.20": "fixtures/versions/4.20/release/crds",
		"4.22": "fixtures/versions/4.22/release/crds", "okd-4.22": "fixtures/versions/4.22/release/crds"}[release]
	names := crdNames(ts, filepath.Join(shared, root))
	if release == "okd-4.22" {
		for _, n := range crdNames(ts, filepath.Join(shared, "fixtures/versions/okd-4.22/release/crds")) {
			i := slices.Index(names, strings.Replace(n, "-OKD.", "-Default.", 1))
			if i < 0 {
				ts.Fatalf("the 4.22 fixture has no -Default counterpart of %s", n)
			}
			names[i] = n
		}
		sort.Strings(names)
	}
	return names
}

// crdNames lists the *.crd.yaml files of dir but the CVO's own, sorted.
func crdNames(ts *testscript.TestScript, dir string) []string {
	ents, err := os.ReadDir(dir)
	ts.Check(err)
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".crd.yaml") && !strings.HasPrefix(e.Name(), "0000_00_cluster-version-operator_") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}
