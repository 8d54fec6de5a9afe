package rehearsal

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/targets/kube"
)

// TestMachinesToDelete: the MachineSet controller's delete priorities (machine-api-operator
// release-4.18 delete_policy.go) pick the surplus Machines under each spec.deletePolicy.
func TestMachinesToDelete(t *testing.T) {
	now := time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)
	type mach struct {
		name, age                string // age: a time.Duration string before now; "" no creationTimestamp
		annotated, old, deleting bool
		failed, node             bool
	}
	mk := func(ms []mach) []kube.Unstructured {
		var out []kube.Unstructured
		for _, m := range ms {
			meta := map[string]any{"name": m.name}
			if m.age != "" {
				d, _ := time.ParseDuration(m.age)
				meta["creationTimestamp"] = now.Add(-d).Format(time.RFC3339)
			}
			if m.annotated {
				meta["annotations"] = map[string]any{DeleteMachineAnnotation: "true"}
			}
			if m.old {
				meta["annotations"] = map[string]any{oldDeleteMachineAnnotation: "true"}
			}
			if m.deleting {
				meta["deletionTimestamp"] = now.Format(time.RFC3339)
			}
			st := map[string]any{}
			if m.failed {
				st["errorMessage"] = "boom"
			}
			if m.node {
				st["nodeRef"] = map[string]any{"kind": "Node", "name": m.name}
			}
			out = append(out, kube.Unstructured{Object: map[string]any{"metadata": meta, "status": st}})
		}
		return out
	}
	three := []mach{{name: "a", age: "48h", node: true}, {name: "b", age: "1h", node: true}, {name: "c", age: "24h", node: true}}
	for _, tc := range []struct {
		name     string
		machines []mach
		diff     int
		policy   string
		want     []string
		err      string
	}{
		{"random ties keep the given order", three, 1, "", []string{"a"}, ""},
		{"Random spelled out", three, 2, "Random", []string{"a", "b"}, ""},
		{"random: annotated first", []mach{{name: "a", node: true}, {name: "b", node: true, annotated: true}}, 1, "", []string{"b"}, ""},
		{"random: the old annotation too", []mach{{name: "a", node: true}, {name: "b", node: true, old: true}}, 1, "", []string{"b"}, ""},
		{"random: no node before a node", []mach{{name: "a", node: true}, {name: "b"}}, 1, "", []string{"b"}, ""},
		{"random: failed before no node", []mach{{name: "a"}, {name: "b", node: true, failed: true}}, 1, "", []string{"b"}, ""},
		{"random: deleting before annotated", []mach{{name: "a", annotated: true}, {name: "b", node: true, deleting: true}}, 1, "", []string{"b"}, ""},
		{"newest", three, 1, "Newest", []string{"b"}, ""},
		{"newest two", three, 2, "Newest", []string{"b", "c"}, ""},
		{"newest: annotated beats age", []mach{{name: "a", age: "48h", annotated: true}, {name: "b", age: "1h"}}, 1, "Newest", []string{"a"}, ""},
		{"oldest", three, 1, "Oldest", []string{"a"}, ""},
		{"oldest: no timestamp last", []mach{{name: "a"}, {name: "b", age: "1m"}}, 1, "Oldest", []string{"b"}, ""},
		{"oldest: failed first", []mach{{name: "a", age: "48h"}, {name: "b", age: "1h", failed: true}}, 1, "Oldest", []string{"b"}, ""},
		{"diff covers all", three, 5, "Newest", []string{"a", "b", "c"}, ""},
		{"nothing to delete", three, 0, "", nil, ""},
		{"unknown policy", three, 1, "Largest", nil, "unsupported delete policy Largest, must be one of 'Random', 'Newest', or 'Oldest'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MachinesToDelete(mk(tc.machines), tc.diff, tc.policy, now)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, m := range got {
				names = append(names, m.GetName())
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("deleted %v, want %v", names, tc.want)
			}
		})
	}
}
