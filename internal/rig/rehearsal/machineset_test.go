package rehearsal

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/internal/rig/repo"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
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

// TestMachineSetStandinAPIServer runs the MachineSet controller's stand-in and CAPBM's part of
// the Metal3 stand-in (ClaimHost, DeleteMachine) against a real kube-apiserver with openshift/
// api's MachineSet and Machine CRDs and the BareMetalHost CRD: a matching orphan is adopted and
// counted, a Machine owned by another controller or with other labels is not; the missing
// replica is made from the template and a second sync changes nothing; a selector that does not
// match the template is refused; a Machine finds no host until one is available, then claims it
// (finalizer, annotation, consumerRef); deleted, it stays until CAPBM's Delete has cleared the
// host, waited for its deprovisioning and released it. CAPBM's Update gives a claimed Machine its
// providerID and, from the host's inspection data, its addresses; the node link stand-in links
// the Node of that InternalIP (status.nodeRef, the Node's machine annotation), CAPBM then sets
// the Node's providerID and the link holds by it; the Machine's Delete deletes that Node and no
// other. Scaled to 0, the set deletes its
// Machines; an unknown delete policy is refused by the CRD.
func TestMachineSetStandinAPIServer(t *testing.T) {
	cp := testenv.StartControlPlane(t, testenv.ControlPlaneOptions{})
	k, err := kube.NewClients(kubedyn.Config(cp.Admin))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	files := map[string][]byte{"00-namespace.yaml": []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + MachineAPINamespace + "\n")}
	for _, f := range []string{"0000_10_machine-api_01_machinesets-Default.crd.yaml", "0000_10_machine-api_01_machines-Default.crd.yaml"} {
		if files[f], err = machineAPICRD(f); err != nil {
			t.Fatal(err)
		}
	}
	if files["bmh.crd.yaml"], err = os.ReadFile(filepath.Join(repo.Root(), "targets", "testdata", "baremetal", "metal3.io_baremetalhosts.crd.yaml")); err != nil {
		t.Fatal(err)
	}
	ap, err := kube.NewApplier(k.Config, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ap.ApplyFiles(ctx, files); err != nil {
		t.Fatal(err)
	}
	sel := map[string]any{"machine.openshift.io/cluster-api-machineset": "ms"}
	tmplLabels := map[string]any{"machine.openshift.io/cluster-api-machineset": "ms", "machine.openshift.io/cluster-api-machine-role": "worker"}
	ps := map[string]any{"apiVersion": "baremetal.cluster.k8s.io/v1alpha1", "kind": "BareMetalMachineProviderSpec",
		"customDeploy": map[string]any{"method": "install_coreos"}, "userData": map[string]any{"name": "worker-user-data-managed"}}
	mkSet := func(name string, replicas int64, selector map[string]any) *kube.Unstructured {
		t.Helper()
		o := &kube.Unstructured{Object: map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
			"metadata": map[string]any{"name": name, "namespace": MachineAPINamespace},
			"spec": map[string]any{"replicas": replicas, "selector": map[string]any{"matchLabels": selector},
				"template": map[string]any{"metadata": map[string]any{"labels": tmplLabels},
					"spec": map[string]any{"providerSpec": map[string]any{"value": ps}}}}}}
		got, err := k.Dynamic.Resource(machineSet).Namespace(MachineAPINamespace).Create(ctx, o, kube.CreateOptions{})
		if err != nil {
			t.Fatalf("machineset %s: %v", name, err)
		}
		return got
	}
	machines := k.Dynamic.Resource(machineGVR).Namespace(MachineAPINamespace)
	mkMachine := func(name string, labels map[string]any, owner map[string]any) {
		t.Helper()
		meta := map[string]any{"name": name, "namespace": MachineAPINamespace, "labels": labels}
		if owner != nil {
			meta["ownerReferences"] = []any{owner}
		}
		o := &kube.Unstructured{Object: map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine", "metadata": meta,
			"spec": map[string]any{"providerSpec": map[string]any{"value": ps}}}}
		if _, err := machines.Create(ctx, o, kube.CreateOptions{}); err != nil {
			t.Fatalf("machine %s: %v", name, err)
		}
	}
	ms := mkSet("ms", 2, sel)
	mkMachine("orphan", tmplLabels, nil)
	mkMachine("foreign", tmplLabels, map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
		"name": "other", "uid": "00000000-0000-0000-0000-000000000001", "controller": true})
	mkMachine("unlabelled", map[string]any{"role": "other"}, nil)
	msc := &MachineSetStandin{Kube: k}
	created, deleted, err := msc.Sync(ctx, "ms")
	if err != nil || len(created) != 1 || len(deleted) != 0 {
		t.Fatalf("sync at replicas 2 with an orphan: created %v, deleted %v, %v; want one created", created, deleted, err)
	}
	checkMachine(ctx, t, k, ms, created[0])
	o, err := machines.Get(ctx, "orphan", kube.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := controllerOf(o); c == nil || c.UID != ms.GetUID() {
		t.Errorf("orphan: controller %+v, want MachineSet ms adopting it", c)
	}
	for _, n := range []string{"foreign", "unlabelled"} {
		o, err := machines.Get(ctx, n, kube.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := controllerOf(o); c != nil && c.UID == ms.GetUID() {
			t.Errorf("%s adopted by ms", n)
		}
	}
	if c, d, err := msc.Sync(ctx, "ms"); err != nil || len(c)+len(d) != 0 {
		t.Errorf("second sync: created %v, deleted %v, %v; want nothing", c, d, err)
	}
	got, _ := k.Dynamic.Resource(machineSet).Namespace(MachineAPINamespace).Get(ctx, "ms", kube.GetOptions{})
	if r := dig(got.Object, "status", "replicas"); r != int64(2) {
		t.Errorf("ms status.replicas %v, want 2", r)
	}
	mkSet("bad", 1, map[string]any{"machine.openshift.io/cluster-api-machineset": "bad"})
	if _, _, err := msc.Sync(ctx, "bad"); err == nil || !strings.Contains(err.Error(), "does not match template") {
		t.Errorf("selector not matching the template: %v", err)
	}

	// CAPBM: no host, then an available one.
	m3 := &Metal3Standin{Kube: k}
	if _, err := m3.ClaimHost(ctx, "orphan"); err == nil || !strings.Contains(err.Error(), "No available BareMetalHost") {
		t.Errorf("claim without hosts: %v", err)
	}
	mkBMH(ctx, t, k, "h1", "h1-bmc-secret", "redfish-virtualmedia+https://198.18.0.1:8000/redfish/v1/Systems/1")
	m3.setStatus(ctx, "h1", StateAvailable, "", "")
	if h, err := m3.ClaimHost(ctx, "orphan"); err != nil || h != "h1" {
		t.Fatalf("claim: %s, %v", h, err)
	}
	o, _ = machines.Get(ctx, "orphan", kube.GetOptions{})
	if a := o.GetAnnotations(); a[HostAnnotation] != MachineAPINamespace+"/h1" || a[InstanceStateAnnotation] != StateAvailable {
		t.Errorf("orphan's annotations %v", a)
	}
	if fin, _ := dig(o.Object, "metadata", "finalizers").([]any); !slices.Contains(fin, any(MachineFinalizer)) {
		t.Errorf("orphan's finalizers %v, want %s", fin, MachineFinalizer)
	}
	if h, err := m3.ClaimHost(ctx, created[0]); err == nil {
		t.Errorf("a second Machine claimed %s, the only host being taken", h)
	}
	if ref := dig(getBMH(ctx, t, k, "h1"), "spec", "consumerRef", "name"); ref != "orphan" {
		t.Errorf("h1 consumerRef %v", ref)
	}
	// CAPBM's Update and the node link: inspection data on h1 (written as IPA's inspection
	// would) gives the Machine its addresses, its InternalIP links Node w1 (w2 has another
	// address, m0 none), then CAPBM gives w1 the Machine's providerID.
	nodes := k.Dynamic.Resource(kube.Nodes)
	for name, ip := range map[string]string{"w1": "198.18.0.21", "w2": "198.18.0.22", "m0": ""} {
		if _, err := nodes.Create(ctx, &kube.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": name}}}, kube.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if ip != "" {
			if _, err := nodes.Patch(ctx, name, kube.MergePatchType, []byte(`{"status":{"addresses":[{"type":"InternalIP","address":"`+ip+`"}]}}`),
				kube.PatchOptions{}, "status"); err != nil {
				t.Fatal(err)
			}
		}
	}
	nl := &NodeLinkStandin{Kube: k}
	if err := m3.UpdateMachine(ctx, "orphan"); err != nil {
		t.Fatal(err)
	}
	if l, err := nl.Sync(ctx); err != nil || len(l) != 0 {
		t.Errorf("node link without inspection data: %v, %v; want no link", l, err)
	}
	if _, err := k.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace).Patch(ctx, "h1", kube.MergePatchType,
		[]byte(`{"status":{"hardware":{"hostname":"w1","nics":[{"name":"enp1s0","mac":"52:54:00:00:00:01","ip":"198.18.0.21"}]}}}`),
		kube.PatchOptions{FieldManager: "inspection"}, "status"); err != nil {
		t.Fatal(err)
	}
	if err := m3.UpdateMachine(ctx, "orphan"); err != nil {
		t.Fatal(err)
	}
	h1 := getBMH(ctx, t, k, "h1")
	wantPID := "baremetalhost:///" + MachineAPINamespace + "/h1/" + dig(h1, "metadata", "uid").(string)
	o, _ = machines.Get(ctx, "orphan", kube.GetOptions{})
	if pid := dig(o.Object, "spec", "providerID"); pid != wantPID {
		t.Errorf("orphan's providerID %v, want %s", pid, wantPID)
	}
	if a := fmt.Sprint(dig(o.Object, "status", "addresses")); a != "[map[address:198.18.0.21 type:InternalIP] map[address:w1 type:Hostname] map[address:w1 type:InternalDNS]]" {
		t.Errorf("orphan's addresses %s", a)
	}
	for pass := range 2 { // by InternalIP, then (after CAPBM's Node providerID) by providerID
		if l, err := nl.Sync(ctx); err != nil || !maps.Equal(l, map[string]string{"w1": "orphan"}) {
			t.Fatalf("node link pass %d: %v, %v; want w1 → orphan", pass, l, err)
		}
		if err := m3.UpdateMachine(ctx, "orphan"); err != nil {
			t.Fatal(err)
		}
	}
	o, _ = machines.Get(ctx, "orphan", kube.GetOptions{})
	w1, err := nodes.Get(ctx, "w1", kube.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := dig(o.Object, "status", "nodeRef").(map[string]any); ref["name"] != "w1" || ref["uid"] != string(w1.GetUID()) || ref["kind"] != "Node" {
		t.Errorf("orphan's nodeRef %v, want Node w1 %s", ref, w1.GetUID())
	}
	if a := w1.GetAnnotations()[MachineAnnotation]; a != MachineAPINamespace+"/orphan" {
		t.Errorf("w1's %s %q", MachineAnnotation, a)
	}
	if pid := dig(w1.Object, "spec", "providerID"); pid != wantPID {
		t.Errorf("w1's providerID %v, want %s", pid, wantPID)
	}

	// Delete: the Machine stays until the host is cleared, deprovisioned (BMO's part, here the
	// status written as BMO would) and released; then its Node is deleted and the finalizer goes.
	m3.setStatus(ctx, "h1", StateProvisioned, "", "")
	if err := machines.Delete(ctx, "orphan", kube.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m3.ClaimHost(ctx, "orphan"); err == nil || !strings.Contains(err.Error(), "being deleted") {
		t.Errorf("claim for a Machine being deleted: %v", err)
	}
	for pass, want := range []bool{false, false} {
		if done, err := m3.DeleteMachine(ctx, "orphan"); err != nil || done != want {
			t.Fatalf("delete pass %d: done %v, %v; want %v", pass, done, err, want)
		}
	}
	spec := getBMH(ctx, t, k, "h1")["spec"].(map[string]any)
	if spec["userData"] != nil || spec["customDeploy"] != nil || spec["online"] != false || dig(spec, "consumerRef", "name") != "orphan" {
		t.Errorf("h1 while orphan is deleted: spec %v", spec)
	}
	m3.setStatus(ctx, "h1", StateAvailable, "", "")
	if done, err := m3.DeleteMachine(ctx, "orphan"); err != nil || !done {
		t.Fatalf("delete once h1 is available: done %v, %v", done, err)
	}
	if _, err := machines.Get(ctx, "orphan", kube.GetOptions{}); !kube.IsNotFound(err) {
		t.Errorf("orphan after its Delete: %v, want not found", err)
	}
	if nl, err := nodes.List(ctx, kube.ListOptions{}); err != nil {
		t.Fatal(err)
	} else if got := nodeNames(nl.Items); !slices.Equal(got, []string{"m0", "w2"}) {
		t.Errorf("Nodes after orphan's Delete: %v, want m0 and w2 (w1 deleted)", got)
	}
	if ref := dig(getBMH(ctx, t, k, "h1"), "spec", "consumerRef"); ref != nil {
		t.Errorf("h1 consumerRef %v after the release", ref)
	}

	// Scale to 0; an unknown policy.
	if _, err := k.Dynamic.Resource(machineSet).Namespace(MachineAPINamespace).Patch(ctx, "ms", kube.MergePatchType,
		[]byte(`{"spec":{"replicas":0}}`), kube.PatchOptions{}, "scale"); err != nil {
		t.Fatal(err)
	}
	if _, d, err := msc.Sync(ctx, "ms"); err != nil || !slices.Equal(d, created) {
		t.Errorf("scale to 0: deleted %v, %v; want %v", d, err, created)
	}
	// An unknown policy never reaches the controller: the CRD's enum refuses it
	// (MachinesToDelete's own refusal is TestMachinesToDelete's).
	if _, err := k.Dynamic.Resource(machineSet).Namespace(MachineAPINamespace).Patch(ctx, "ms", kube.MergePatchType,
		[]byte(`{"spec":{"deletePolicy":"Largest"}}`), kube.PatchOptions{}); err == nil || !strings.Contains(err.Error(), "deletePolicy") {
		t.Errorf("deletePolicy Largest: %v, want the API's refusal naming spec.deletePolicy", err)
	}
}

func nodeNames(items []kube.Unstructured) []string {
	var out []string
	for _, n := range items {
		out = append(out, n.GetName())
	}
	slices.Sort(out)
	return out
}
