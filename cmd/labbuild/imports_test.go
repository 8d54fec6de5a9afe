package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// startupForbidden are packages whose initializers are expensive at process start and that the
// labbuild binary must not link (issue 18, docs/performance.md): every package init runs before
// main, for `labbuild version` and a null build as much as for `labbuild cluster`. A prefix
// ending in "/" forbids the whole tree.
var startupForbidden = []string{
	// client-go's typed clientset and its scheme: registers all 55 k8s.io/api groups (~10 ms).
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/kubernetes/",
	// discovery and restmapper import that scheme; openapi documents come with them.
	"k8s.io/client-go/discovery",
	"k8s.io/client-go/discovery/",
	"k8s.io/client-go/restmapper",
	"k8s.io/client-go/applyconfigurations/",
	"k8s.io/client-go/openapi",
	// the dynamic client links go-cmp (regexp tables) and the watch-list consistency checks;
	// targets/kube has its own dynamic-shaped client over rest.
	"k8s.io/client-go/dynamic",
	"k8s.io/client-go/dynamic/",
	"github.com/google/go-cmp/",
	"github.com/google/gnostic-models/",
	// The reflection-based protobuf runtime and its descriptor tables (gnostic, the typed
	// scheme's protobuf serializers).
	"google.golang.org/protobuf/",
	"sigs.k8s.io/structured-merge-diff/v4/typed",
	// openshift/api's feature gate tables, built by initializers (render/manifests reads a
	// generated copy, featuregates_gen.go).
	"github.com/openshift/api/features",
	"sigs.k8s.io/structured-merge-diff/v4/schema",
	// Ignition spec versions 3.0-3.3 and their translators: config/v3_4 (Parse and
	// ParseCompatibleVersion) links them all; render/ignition reads and writes only 3.4.0 and
	// validates with config/validate (parse34).
	"github.com/coreos/ignition/v2/config/v3_0",
	"github.com/coreos/ignition/v2/config/v3_0/",
	"github.com/coreos/ignition/v2/config/v3_1",
	"github.com/coreos/ignition/v2/config/v3_1/",
	"github.com/coreos/ignition/v2/config/v3_2",
	"github.com/coreos/ignition/v2/config/v3_2/",
	"github.com/coreos/ignition/v2/config/v3_3",
	"github.com/coreos/ignition/v2/config/v3_3/",
	"github.com/coreos/ignition/v2/config/v3_4",
	"github.com/coreos/ignition/v2/config/v3_4/translate",
	"github.com/coreos/ignition/v2/config/translate",
}

// startupAPIGroups are the only k8s.io/api packages the binary may link: each registers its
// protobuf types at start-up, so a new one is a deliberate choice, not an accident of an import.
var startupAPIGroups = []string{
	"k8s.io/api/core/v1",          // render/manifests, targets/kube (Node, Pod, ConfigMap)
	"k8s.io/api/rbac/v1",          // render/manifests
	"k8s.io/api/authorization/v1", // openshift/api operator/v1 imports it
	"k8s.io/api/certificates/v1",  // targets/csr
}

// TestStartupImports lists the binary's packages (`go list -deps`) and fails on a forbidden
// one, naming the importer chain's first step so the regression is easy to find.
func TestStartupImports(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	importers := map[string][]string{}
	var pkgs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkgs = append(pkgs, f[0])
		for _, imp := range f[1:] {
			importers[imp] = append(importers[imp], f[0])
		}
	}
	if !slices.Contains(pkgs, "k8s.io/client-go/rest") {
		t.Fatalf("go list -deps gave %d packages without k8s.io/client-go/rest: the list is not the binary's", len(pkgs))
	}
	for _, p := range pkgs {
		bad := strings.HasPrefix(p, "k8s.io/api/") && !slices.Contains(startupAPIGroups, p)
		for _, f := range startupForbidden {
			if p == f || strings.HasSuffix(f, "/") && strings.HasPrefix(p, f) {
				bad = true
			}
		}
		if bad {
			by := importers[p]
			if len(by) > 3 {
				by = append(by[:3:3], "...")
			}
			t.Errorf("labbuild links %s (imported by %s): its init runs at every start (docs/performance.md)", p, strings.Join(by, ", "))
		}
	}
}
