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
	// All of client-go: the typed clientset's scheme (all 55 k8s.io/api groups, ~10 ms), and
	// even rest and clientcmd (42 packages: the exec credential plugin's scheme, klog flags,
	// rate limiters, the serializer stack). targets/kube talks to the API with its own client
	// on net/http (docs/kube-client.md); render/kubeconfig writes clientcmd's bytes itself.
	"k8s.io/client-go/",
	// All of apimachinery (runtime's schemes, CBOR tables, json-iterator, klog through it):
	// targets/kube has local equivalents of the API errors, unstructured objects and options
	// (types.go), render/manifests local mirrors of the objects it writes.
	"k8s.io/apimachinery/",
	"k8s.io/klog/",
	"golang.org/x/oauth2",
	"golang.org/x/oauth2/",
	"github.com/google/go-cmp/",
	"github.com/google/gnostic-models/",
	// The reflection-based protobuf runtime and its descriptor tables (gnostic, the typed
	// scheme's protobuf serializers).
	"google.golang.org/protobuf/",
	"sigs.k8s.io/structured-merge-diff/v4/typed",
	// openshift/api: its feature gate tables are built by initializers (render/manifests reads
	// a generated copy, featuregates_gen.go), and its config/v1, operator/v1 and image/v1
	// packages register their types at start (~1.8 ms, ~1000 allocations); render/manifests
	// writes and reads them through local mirrors (types.go, docs/api-mirrors.md).
	"github.com/openshift/api/",
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
// None today: render/manifests and targets/kube use local mirrors of the types.
var startupAPIGroups = []string{}

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
	if !slices.Contains(pkgs, "github.com/labbuild/labbuild/targets/kube") {
		t.Fatalf("go list -deps gave %d packages without targets/kube: the list is not the binary's", len(pkgs))
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
