package rehearsal

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/labbuild/labbuild/internal/rig/repo"
	"github.com/labbuild/labbuild/targets"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/virt"
)

// TestMetal3Media: the stand-in's boot media carries the user data byte for byte, and a file
// that is not such media is refused naming it.
func TestMetal3Media(t *testing.T) {
	dir := t.TempDir()
	for _, ign := range [][]byte{[]byte(`{"ignition":{"version":"3.2.0"}}`), {}, bytes.Repeat([]byte("x"), 4097)} {
		p := filepath.Join(dir, "boot.iso")
		os.WriteFile(p, MediaFile(ign), 0o644)
		got, err := MediaIgnition(p)
		if err != nil || !bytes.Equal(got, ign) {
			t.Errorf("%d bytes: read back %d bytes, %v", len(ign), len(got), err)
		}
	}
	p := filepath.Join(dir, "other.iso")
	os.WriteFile(p, bytes.Repeat([]byte("CD001"), 100), 0o644)
	if _, err := MediaIgnition(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("not media: %v", err)
	}
}

// TestParseBMCAddress: BMO's redfish address forms; only virtual media is driven.
func TestParseBMCAddress(t *testing.T) {
	for _, tc := range []struct{ addr, endpoint, system, err string }{
		{"redfish-virtualmedia+https://198.18.0.1:8000/redfish/v1/Systems/abc", "https://198.18.0.1:8000", "/redfish/v1/Systems/abc", ""},
		{"redfish-virtualmedia://bmc.example/redfish/v1/Systems/1", "https://bmc.example", "/redfish/v1/Systems/1", ""},
		{"redfish-virtualmedia+http://[fd00::1]:8000/redfish/v1/Systems/1", "http://[fd00::1]:8000", "/redfish/v1/Systems/1", ""},
		{"redfish+https://198.18.0.1:8000/redfish/v1/Systems/abc", "", "", "virtual media only"},
		{"ipmi://198.18.0.1", "", "", "virtual media only"},
		{"redfish-virtualmedia+https://198.18.0.1:8000", "", "", "no System path"},
		{"not a url", "", "", "not a URL"},
	} {
		e, s, err := parseBMCAddress(tc.addr)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.addr, err, tc.err)
			}
			continue
		}
		if err != nil || e != tc.endpoint || s != tc.system {
			t.Errorf("%s: %q %q %v", tc.addr, e, s, err)
		}
	}
}

// worker1IP is the second worker's address in the platform-baremetal rehearsal.
const worker1IP = "198.18.0.111"

// TestMetal3StandinDrivesWorker is platform: baremetal under the rehearsal, up to a worker
// provisioned by Metal3 and joined:
//
//   - labbuild (platform baremetal, in-cluster VIPs) builds the bootstrap's Ignition, the
//     worker domains (defined, not started, no Ignition, an empty disk: Metal3 provisions
//     them), bmc/service (its Redfish BMC, in the lab's namespace on the lab bridge) and
//     bmc/manifests;
//   - the bootstrap's real control plane runs from bootstrap.ign; the BareMetalHost and
//     Provisioning CRDs are applied as the cluster-baremetal-operator would (the MachineSet's
//     as the CVO would), and bootkube.service applies bootstrap.ign's manifests, bmc/manifests'
//     hosts (master-0 externally provisioned, the workers paused), Secrets and MachineSet among
//     them: the hosts are registered in the real kube-apiserver;
//   - the Metal3 stand-in (metal3.go) refuses the hosts while they are paused; once unpaused
//     as the installer's master-bmh-update.sh does, it verifies the BMC against Ironic's
//     bundle, ConfigMap openshift-machine-api/cbo-trusted-ca (applied empty and labelled, as
//     the cluster-baremetal-operator's manifest is): before the network operator's injection
//     stand-in (cno.go) fills it, the TLS handshake fails, with the error in the host's
//     status; after it, cbo-trusted-ca holds exactly the BMC CA, from the Proxy's trustedCA
//     user-ca-bundle that labbuild's bootstrap manifests carry (the hosts do not set
//     disableCertificateVerification), and each worker registers: the BMC answers for each
//     worker VM (its System at the host's address, with its credentials Secret); a host whose
//     Secret is missing, one with a wrong password (401) and one naming an unknown System fail
//     as BMO/Ironic would, with the error in their status; with user-ca-bundle holding another
//     CA and injected, a host fails the handshake again, and registers once it is restored;
//   - the worker MachineSet (replicas: one per worker host) is scaled to 1 through its scale
//     subresource, as `oc scale machineset` does, before the machine-api's first sync: worker-1
//     is a spare host. The MachineSet controller's stand-in (machineset.go) creates one Machine
//     from the template (generateName, labels, providerSpec, the set as controller owner); the
//     Metal3 stand-in, as the machine controller with CAPBM's Actuator.Create, claims a host for
//     it and annotates the Machine with metal3.io/BareMetalHost, and, as BMO with Ironic, drives
//     that worker's BMC by the redfish-virtualmedia sequence with the user-data Secret on the
//     media; libvirt starts the domain (seen by Watch), the node boots with the Ignition read
//     from the CD-ROM libvirt attached, and its real kubelet joins (its CSRs approved by
//     labbuild's approver, as cluster/workers does); the other worker stays off, and master-0's
//     host (externally provisioned) is never chosen;
//   - scale up to 2: a second Machine, worker-1 claimed, provisioned through its BMC, booted and
//     joined; both Machines annotated with distinct hosts, both Nodes Ready; with each host's
//     inspection data written as IPA's inspection would (the stand-in skips inspection), CAPBM's
//     Update gives each Machine its providerID and InternalIP, the node link stand-in sets each
//     Machine's status.nodeRef to its worker's Node, and CAPBM sets that Node's providerID;
//   - scale down to 1, the second Machine annotated machine.openshift.io/delete-machine: the
//     controller deletes it, the Machine stays (finalizer) and is not replaced; CAPBM's Delete
//     takes the host's user data, customDeploy and online away, BMO deprovisions it (power off
//     and eject through the BMC), CAPBM releases it and the Machine goes: one Machine left,
//     worker-1's host available without a consumerRef, its domain shut off with no media in its
//     CD-ROM, worker-0 still provisioned, running and Ready; worker-1's Node deleted (the machine
//     controller's deleteNode for status.nodeRef; its drain is skipped): the Nodes are those of
//     before the scale up.
//
// Not the full flow (TestInClusterFlow, issue 25): the API VIP is put on the bootstrap by the
// test where the bootstrap's keepalived would take it (TestInClusterBootstrapVIP shows that),
// and the worker-user-data-managed Secret holds worker-0's Ignition as built by labbuild (then
// worker-1's, before the scale up), where the MCO writes one pointer config that the
// machine-config-server (not stood in for) would answer, each node named by DHCP;
// docs/baremetal.md says what the full flow needs.
func TestMetal3StandinDrivesWorker(t *testing.T) {
	requireRehearsal(t)
	kubectl := pinnedTool(t, "kubectl")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	pool := flowPool(t) // before newRig: its cleanup runs after libvirtd's
	r := newRig(t, true)
	labYAMLPath := filepath.Join(r.lab, "lab.yaml")
	b, err := os.ReadFile(labYAMLPath)
	if err != nil {
		t.Fatal(err)
	}
	lab := "platform: baremetal\n" + strings.Replace(string(b), "network:\n", "network:\n  loadBalancer: in-cluster\n", 1)
	m0 := "  - {name: master-0, role: master, ip: " + master0IP + "}\n"
	lab = strings.Replace(lab, m0, m0+"  - {name: worker-0, role: worker, ip: "+worker0IP+"}\n"+
		"  - {name: worker-1, role: worker, ip: "+worker1IP+"}\n", 1)
	// As TestRehearsalFlow: the guests touch little of their memory and disk here (the pool on
	// flowPool's tmpfs, which host/preflight's disk check reads).
	lab = regexp.MustCompile(`(?m)^  poolPath: .*$`).ReplaceAllString(lab, "  poolPath: "+pool)
	lab = strings.Replace(lab, "  domainType: qemu\n", "  domainType: qemu\n  memoryOvercommit: true\n", 1)
	lab += "sizes:\n  bootstrap: {diskGiB: 20}\n  master: {diskGiB: 20}\n  worker: {diskGiB: 20}\n"
	os.WriteFile(labYAMLPath, []byte(lab), 0o644)
	if out, err := r.labbuild("ignition/bootstrap", "ignition/worker-0", "ignition/worker-1", "kubeconfig/admin", "libvirt/dns",
		"libvirt/vm/worker-0", "libvirt/vm/worker-1", "bmc/service", "bmc/manifests"); err != nil {
		t.Fatalf("labbuild: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := r.labbuild("destroy", "bmc/service"); err != nil {
			t.Logf("destroy bmc/service: %v\n%s", err, out)
		}
	})
	uri := r.lv.URI("qemu:///system")
	workers := []string{"worker-0", "worker-1"}
	// The workers are handed over empty: defined, off, no Ignition on fw_cfg.
	lc, err := virt.Connect(uri)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	uuids := map[string]string{}
	for _, w := range workers {
		d, st, found, err := lc.Domain("rehearsal-" + w)
		if err != nil || !found {
			t.Fatalf("domain rehearsal-%s: found %v, %v", w, found, err)
		}
		if st == virt.DomainRunning {
			t.Errorf("%s is running before Metal3 powers it on", w)
		}
		if x, _ := d.Marshal(); strings.Contains(x, "opt/com.coreos/config") {
			t.Errorf("%s's domain carries an Ignition config on fw_cfg; Metal3 provisions workers", w)
		}
		uuids[w] = d.UUID
	}

	// Each worker domain that libvirt starts (the BMC's power on) becomes its node, with the
	// Ignition on the CD-ROM the domain was started with.
	var (
		mu      sync.Mutex
		booted  = map[string][]byte{}
		upErrs  []error
		mediaOf = map[string]string{}
	)
	upFail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		upErrs = append(upErrs, err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	w := &Watch{URI: uri, Cluster: "rehearsal", Nodes: workers,
		Up: func(node string) {
			c, err := virt.Connect(uri)
			if err != nil {
				upFail(err)
				return
			}
			defer c.Close()
			live, err := c.LiveDomain("rehearsal-" + node)
			if err != nil {
				upFail(err)
				return
			}
			iso, order := liveCDROM(live)
			if iso == "" || len(order) == 0 || order[0] != "cdrom" {
				upFail(fmt.Errorf("%s started without virtual media first in its boot order (CD-ROM %q, order %v)", node, iso, order))
				return
			}
			ign, err := MediaIgnition(iso)
			if err != nil {
				upFail(err)
				return
			}
			mu.Lock()
			booted[node], mediaOf[node] = ign, iso
			mu.Unlock()
			nd, err := r.bootIgnition(node, ign)
			if err != nil {
				upFail(fmt.Errorf("%s: boot: %w", node, err))
				return
			}
			if err := r.kubelet(wctx, nd, map[string]string{"worker-0": "10.131.0.0/23", "worker-1": "10.131.2.0/23"}[node]); err != nil {
				upFail(fmt.Errorf("%s: kubelet: %w", node, err))
			}
		},
		Down: func(node string) { r.stop(node) },
	}
	go w.Run(wctx)

	// The bootstrap's control plane; the API VIP on it (its keepalived's part).
	bNode, err := r.boot("bootstrap")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.staticPods(bNode); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "-n", bNode.NetNS, "addr", "add", apiVIP+"/32", "dev", "eth0").CombinedOutput(); err != nil {
		t.Fatalf("API VIP on the bootstrap: %v %s", err, out)
	}
	k, err := r.clients()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "/readyz through the API VIP", 5*time.Minute, func() (bool, string) {
		err := kube.Readyz(ctx, k)
		return err == nil, fmt.Sprint(err)
	})
	startBootkube(ctx, t, bNode, kubectl, k)

	// The cluster-baremetal-operator's BareMetalHost CRD (its Provisioning CRD came with
	// startBootkube's CVO stand-in) and the machine-api's namespace and MachineSet CRD, as
	// that operator and the CVO would apply them; bootkube.sh then applies bootstrap.ign's
	// manifests, among them bmc/manifests' hosts, Secrets and MachineSet and the Provisioning
	// CR, and finishes.
	ap, err := kube.NewApplier(k.Config, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// The namespace too: the machine-api-operator's manifests create it (CVO).
	files := map[string][]byte{"00-namespace.yaml": []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + MachineAPINamespace + "\n")}
	bmh, err := os.ReadFile(filepath.Join(repo.Root(), "targets", "testdata", "baremetal", "metal3.io_baremetalhosts.crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files["metal3.io_baremetalhosts.crd.yaml"] = bmh
	for _, f := range []string{"0000_10_machine-api_01_machinesets-Default.crd.yaml", "0000_10_machine-api_01_machines-Default.crd.yaml"} {
		if files[f], err = machineAPICRD(f); err != nil {
			t.Fatal(err)
		}
	}
	// The cluster-baremetal-operator's empty cbo-trusted-ca, labelled for the network
	// operator's injection.
	files[CBOTrustedCAFile] = CBOTrustedCA
	waitFor(ctx, t, "the BareMetalHost, MachineSet and Machine CRDs and cbo-trusted-ca applied", 2*time.Minute, func() (bool, string) {
		_, err := ap.ApplyFiles(ctx, files)
		return err == nil, fmt.Sprint(err)
	})
	waitFor(ctx, t, "bootkube.service applied every manifest of bootstrap.ign", 6*time.Minute, func() (bool, string) {
		_, err := os.Stat(filepath.Join(bNode.Root, "opt", "openshift", ".bootkube.done"))
		blog, _ := os.ReadFile(filepath.Join(bNode.LogDir, "bootkube.log"))
		return err == nil, fmt.Sprint(notApplied(string(blog)))
	})
	hl, err := k.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace).List(ctx, kube.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var registered []string
	for _, h := range hl.Items {
		registered = append(registered, h.GetName())
	}
	slices.Sort(registered)
	if want := []string{"master-0", "worker-0", "worker-1"}; !slices.Equal(registered, want) {
		t.Fatalf("BareMetalHosts from bootstrap.ign: %v, want %v", registered, want)
	}

	// The BMC's CA, to compare with what the cluster's bundle holds (the stand-ins read only
	// the cluster).
	bmcCA, err := os.ReadFile(filepath.Join(r.lab, "out", "pki", "ca", "bmc", "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := ListenIn(r.labNS, "198.18.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var slog bytes.Buffer
	m3 := &Metal3Standin{Kube: k, Dial: DialIn(r.labNS), Media: ln, MediaURL: "http://" + ln.Addr().String(), Log: &slog}
	defer func() { t.Logf("%s", slog.String()) }()
	cno := &TrustedCAInjector{Kube: k}

	// Paused, as the installer writes workers: no work.
	for _, w := range workers {
		if _, err := m3.Reconcile(ctx, w); !errors.Is(err, ErrPaused) {
			t.Errorf("%s: paused host reconciled: %v", w, err)
		}
	}
	// What cluster/pivot does on this platform once the bootstrap is off.
	if got, err := targets.UnpauseBareMetalHosts(ctx, k.Dynamic); err != nil || !slices.Equal(got, workers) {
		t.Fatalf("unpaused %v (%v), want the workers %v", got, err, workers)
	}
	// Before the network operator fills cbo-trusted-ca, Ironic trusts nothing: the TLS
	// handshake with the BMC fails, and the error is in the host's status.
	if _, err := m3.Reconcile(ctx, "worker-0"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("worker-0 with an empty cbo-trusted-ca: %v, want a certificate error", err)
	}
	if msg, _ := dig(getBMH(ctx, t, k, "worker-0"), "status", "errorMessage").(string); !strings.Contains(msg, "certificate") || !strings.Contains(msg, CBOTrustedCAName) {
		t.Errorf("worker-0: status.errorMessage %q, want the certificate error naming %s", msg, CBOTrustedCAName)
	}
	// The network operator's injection: from the Proxy's trustedCA (user-ca-bundle, which
	// labbuild's bootstrap manifests hold: the BMC CA) into cbo-trusted-ca.
	if changed, err := cno.Inject(ctx); err != nil || !slices.Equal(changed, []string{MachineAPINamespace + "/" + CBOTrustedCAName}) {
		t.Fatalf("trusted-CA injection: changed %v, %v; want %s/%s", changed, err, MachineAPINamespace, CBOTrustedCAName)
	}
	if got := cboTrustedCA(ctx, t, k); got != string(bmcCA) {
		t.Errorf("cbo-trusted-ca ca-bundle.crt:\n%s\nwant the BMC CA (pki/ca/bmc):\n%s", got, bmcCA)
	}
	if changed, err := cno.Inject(ctx); err != nil || len(changed) != 0 {
		t.Errorf("a second injection changed %v, %v; want nothing", changed, err)
	}
	// Registration: the BMC answers for each worker VM at its host's address, verified
	// against cbo-trusted-ca.
	for _, w := range workers {
		st, err := m3.Reconcile(ctx, w)
		if err != nil || st != StateAvailable {
			t.Fatalf("%s: registration: %s, %v", w, st, err)
		}
		h := getBMH(ctx, t, k, w)
		if addr := dig(h, "spec", "bmc", "address").(string); !strings.HasSuffix(addr, "/redfish/v1/Systems/"+uuids[w]) {
			t.Errorf("%s: BMC address %s is not its domain's System %s", w, addr, uuids[w])
		}
		if got := dig(h, "status", "provisioning", "state"); got != StateAvailable {
			t.Errorf("%s: status.provisioning.state %v", w, got)
		}
	}
	// Where Metal3 fails: no Secret, a wrong password, an unknown System.
	bmcAddr := dig(getBMH(ctx, t, k, "worker-0"), "spec", "bmc", "address").(string)
	mkSecret(ctx, t, k, "wrong-bmc-secret", map[string]string{"username": "labbuild", "password": "not-the-password"})
	for _, bad := range []struct{ name, secret, addr, want string }{
		{"bad-nosecret", "absent-bmc-secret", bmcAddr, "absent-bmc-secret"},
		{"bad-password", "wrong-bmc-secret", bmcAddr, "401"},
		{"bad-system", "worker-0-bmc-secret", bmcAddr[:strings.LastIndex(bmcAddr, "/")+1] + "00000000-0000-0000-0000-000000000000", "404"},
	} {
		mkBMH(ctx, t, k, bad.name, bad.secret, bad.addr)
		_, err := m3.Reconcile(ctx, bad.name)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error naming %s", bad.name, err, bad.want)
		}
		if msg, _ := dig(getBMH(ctx, t, k, bad.name), "status", "errorMessage").(string); !strings.Contains(msg, bad.want) {
			t.Errorf("%s: status.errorMessage %q", bad.name, msg)
		}
	}

	// A cbo-trusted-ca without the BMC's CA (user-ca-bundle holding another CA, injected):
	// the TLS handshake fails; with user-ca-bundle as labbuild wrote it, injected again, the
	// host registers.
	mkBMH(ctx, t, k, "verified", "worker-0-bmc-secret", bmcAddr)
	rootCA, err := os.ReadFile(filepath.Join(r.lab, "out", "pki", "ca", "root", "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	labBundle := setUserCABundle(ctx, t, k, string(rootCA))
	if _, err := cno.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m3.Reconcile(ctx, "verified"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("verified: cbo-trusted-ca without the BMC CA: %v, want a certificate error", err)
	}
	setUserCABundle(ctx, t, k, labBundle)
	if _, err := cno.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := m3.Reconcile(ctx, "verified"); err != nil || st != StateAvailable {
		t.Errorf("verified: cbo-trusted-ca with the BMC CA again: %s, %v", st, err)
	}
	k.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace).Delete(ctx, "verified", kube.DeleteOptions{})

	// The MCO's user data (see the test's doc: labbuild's worker-0 Ignition stands in for the
	// pointer config and the machine-config-server's answer).
	ign, err := os.ReadFile(filepath.Join(r.lab, "out", "ignition", "worker-0.ign"))
	if err != nil {
		t.Fatal(err)
	}
	mkSecret(ctx, t, k, "worker-user-data-managed", map[string]string{"userData": string(ign)})

	sets, err := k.Dynamic.Resource(machineSet).Namespace(MachineAPINamespace).List(ctx, kube.ListOptions{})
	if err != nil || len(sets.Items) != 1 {
		t.Fatalf("MachineSets: %v (%d)", err, len(sets.Items))
	}
	set := sets.Items[0].GetName()
	// bmc/manifests' MachineSet asks for every worker host (replicas 2); the lab starts with
	// one, worker-1 a spare host: `oc scale machineset --replicas=1` before the machine-api's
	// first sync, as oc does it (a merge patch of spec.replicas through the scale subresource).
	if got, _ := dig(sets.Items[0].Object, "spec", "replicas").(int64); got != int64(len(workers)) {
		t.Errorf("MachineSet %s: spec.replicas %d, want one per worker host (%d)", set, got, len(workers))
	}
	scale := func(n int) {
		t.Helper()
		if _, err := k.Dynamic.Resource(machineSet).Namespace(MachineAPINamespace).Patch(ctx, set, kube.MergePatchType,
			[]byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)), kube.PatchOptions{}, "scale"); err != nil {
			t.Fatalf("scale machineset %s --replicas=%d: %v", set, n, err)
		}
	}
	scale(1)
	// The MachineSet controller's step: one Machine for spec.replicas 1, from the template.
	msc := &MachineSetStandin{Kube: k, Log: &slog}
	created, deleted, err := msc.Sync(ctx, set)
	if err != nil || len(created) != 1 || len(deleted) != 0 {
		t.Fatalf("MachineSet %s at replicas 1: created %v, deleted %v, %v; want one Machine created", set, created, deleted, err)
	}
	machine0 := created[0]
	checkMachine(ctx, t, k, &sets.Items[0], machine0)
	if c, d, err := msc.Sync(ctx, set); err != nil || len(c)+len(d) != 0 {
		t.Errorf("a second sync at replicas 1: created %v, deleted %v, %v; want nothing", c, d, err)
	}
	t0 := time.Now()
	host, err := m3.ClaimHost(ctx, machine0)
	if err != nil {
		t.Fatal(err)
	}
	if host != "worker-0" {
		t.Fatalf("claimed %s, want worker-0 (the first available by name)", host)
	}
	if st, err := m3.Reconcile(ctx, host); err != nil || st != StateProvisioned {
		t.Fatalf("%s: provisioning: %s, %v", host, st, err)
	}
	if again, err := m3.ClaimHost(ctx, machine0); err != nil || again != host {
		t.Errorf("the same Machine claimed %s, %v (want its host %s again)", again, err, host)
	}

	waitWorkers := func(what string, want map[string]string) {
		t.Helper()
		expected := map[string]csr.NodeIdentity{}
		var names []string
		for w, ip := range want {
			name := w + "." + labDomain
			expected[name] = csr.NodeIdentity{Name: name, IPs: []string{ip}, DNSNames: []string{w}}
			names = append(names, name)
		}
		waitFor(ctx, t, what, 8*time.Minute, func() (bool, string) {
			mu.Lock()
			errs := errors.Join(upErrs...)
			mu.Unlock()
			if errs != nil {
				t.Fatal(errs)
			}
			if _, err := csr.Approve(ctx, k.Dynamic, expected); err != nil {
				return false, err.Error()
			}
			ready, _, err := kube.NodesReady(ctx, k.Dynamic, names)
			return err == nil && len(ready) == len(names), fmt.Sprintf("ready %v, err %v; watch errors %v", ready, err, w.Errs())
		})
	}
	waitWorkers("worker-0 booted from virtual media, its CSRs approved and its Node Ready", map[string]string{"worker-0": worker0IP})
	t.Logf("worker-0: Machine %s created, host claimed, provisioned through the BMC and its Node Ready %v later", machine0, time.Since(t0).Round(time.Second))
	mu.Lock()
	if !bytes.Equal(booted["worker-0"], ign) {
		t.Errorf("worker-0 booted with %d bytes of Ignition from %s, want the user-data Secret's %d", len(booted["worker-0"]), mediaOf["worker-0"], len(ign))
	}
	if _, ok := booted["worker-1"]; ok {
		t.Errorf("worker-1 booted: nothing provisioned it")
	}
	mu.Unlock()
	if _, st, _, _ := lc.Domain("rehearsal-worker-1"); st == virt.DomainRunning {
		t.Errorf("worker-1's domain runs: nothing powered it on")
	}
	// CAPBM's Update and the node link: the Machine gets its providerID and, from the host's
	// inspection data, its InternalIP, by which the node link finds its Node.
	nl := &NodeLinkStandin{Kube: k, Log: &slog}
	linkNodes := func(want map[string]string) {
		t.Helper()
		for _, mach := range slices.Sorted(maps.Values(want)) {
			if err := m3.UpdateMachine(ctx, mach); err != nil {
				t.Fatal(err)
			}
		}
		got, err := nl.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for mach := range maps.Values(want) { // CAPBM: the Node's providerID, once linked
			if err := m3.UpdateMachine(ctx, mach); err != nil {
				t.Fatal(err)
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("node link: %v, want %v", got, want)
		}
		for node, mach := range want {
			mo, err := k.Dynamic.Resource(machineGVR).Namespace(MachineAPINamespace).Get(ctx, mach, kube.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if ref := dig(mo.Object, "status", "nodeRef", "name"); ref != node {
				t.Errorf("Machine %s: status.nodeRef %v, want Node %s", mach, ref, node)
			}
			n, err := k.Dynamic.Resource(kube.Nodes).Get(ctx, node, kube.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pid, want := dig(n.Object, "spec", "providerID"), dig(mo.Object, "spec", "providerID"); pid != want || pid == nil {
				t.Errorf("Node %s: spec.providerID %v, want the Machine's %v", node, pid, want)
			}
		}
	}
	inspected(ctx, t, k, "worker-0", worker0IP)
	linkNodes(map[string]string{"worker-0." + labDomain: machine0})
	baseNodes := nodeSet(ctx, t, k)
	if !slices.Contains(baseNodes, "worker-0."+labDomain) {
		t.Fatalf("Nodes %v: no worker-0", baseNodes)
	}

	// Scale up, as before. The user data for the next worker: see the test's doc (the
	// machine-config-server and DHCP would give it its own identity).
	ign1, err := os.ReadFile(filepath.Join(r.lab, "out", "ignition", "worker-1.ign"))
	if err != nil {
		t.Fatal(err)
	}
	setSecret(ctx, t, k, "worker-user-data-managed", map[string]string{"userData": string(ign1)})
	t1 := time.Now()
	scale(2)
	created, deleted, err = msc.Sync(ctx, set)
	if err != nil || len(created) != 1 || len(deleted) != 0 {
		t.Fatalf("MachineSet %s at replicas 2: created %v, deleted %v, %v; want one more Machine", set, created, deleted, err)
	}
	machine1 := created[0]
	checkMachine(ctx, t, k, &sets.Items[0], machine1)
	host1, err := m3.ClaimHost(ctx, machine1)
	if err != nil || host1 != "worker-1" {
		t.Fatalf("Machine %s claimed %q, %v; want worker-1 (worker-0 is taken)", machine1, host1, err)
	}
	if st, err := m3.Reconcile(ctx, host1); err != nil || st != StateProvisioned {
		t.Fatalf("%s: provisioning: %s, %v", host1, st, err)
	}
	waitWorkers("worker-1 booted from virtual media and both Nodes Ready", map[string]string{"worker-0": worker0IP, "worker-1": worker1IP})
	t.Logf("scale up: Machine %s created, worker-1 provisioned and its Node Ready %v after the scale", machine1, time.Since(t1).Round(time.Second))
	mu.Lock()
	if !bytes.Equal(booted["worker-1"], ign1) {
		t.Errorf("worker-1 booted with %d bytes of Ignition from %s, want the user-data Secret's %d", len(booted["worker-1"]), mediaOf["worker-1"], len(ign1))
	}
	mu.Unlock()
	m3.ClaimHost(ctx, machine1) // a later reconcile: the instance state annotation follows the host
	inspected(ctx, t, k, "worker-1", worker1IP)
	linkNodes(map[string]string{"worker-0." + labDomain: machine0, "worker-1." + labDomain: machine1})
	if got, want := nodeSet(ctx, t, k), slices.Sorted(slices.Values(append(slices.Clone(baseNodes), "worker-1."+labDomain))); !slices.Equal(got, want) {
		t.Errorf("Nodes after the scale up: %v, want %v", got, want)
	}
	if got := machineHosts(ctx, t, k); !maps.Equal(got, map[string]string{machine0: MachineAPINamespace + "/worker-0", machine1: MachineAPINamespace + "/worker-1"}) {
		t.Errorf("Machines → %s after the scale up: %v, want %s → worker-0, %s → worker-1", HostAnnotation, got, machine0, machine1)
	}

	// Scale down, the second Machine marked to go first (oc annotate machine NAME
	// machine.openshift.io/delete-machine=true): with the Random policy and both linked to
	// their Nodes, the two Machines are otherwise of equal priority.
	if _, err := k.Dynamic.Resource(machineGVR).Namespace(MachineAPINamespace).Patch(ctx, machine1, kube.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+DeleteMachineAnnotation+`":"true"}}}`), kube.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t2 := time.Now()
	scale(1)
	created, deleted, err = msc.Sync(ctx, set)
	if err != nil || len(created) != 0 || !slices.Equal(deleted, []string{machine1}) {
		t.Fatalf("MachineSet %s at replicas 1: created %v, deleted %v, %v; want %s deleted", set, created, deleted, err, machine1)
	}
	// The Machine stays, being deleted, until the machine controller's Delete: the MachineSet
	// no longer counts it and makes no replacement.
	if c, d, err := msc.Sync(ctx, set); err != nil || len(c)+len(d) != 0 {
		t.Errorf("a sync while %s is being deleted: created %v, deleted %v, %v; want nothing", machine1, c, d, err)
	}
	if done, err := m3.DeleteMachine(ctx, machine1); err != nil || done {
		t.Fatalf("delete %s, first pass: done %v, %v; want the host's deprovisioning started", machine1, done, err)
	}
	h1 := getBMH(ctx, t, k, "worker-1")
	if spec := h1["spec"].(map[string]any); spec["userData"] != nil || spec["customDeploy"] != nil || spec["image"] != nil || spec["online"] != false || dig(spec, "consumerRef", "name") != machine1 {
		t.Errorf("worker-1 after CAPBM's Delete: spec %v; want userData, customDeploy and image gone, online false, consumerRef still %s", spec, machine1)
	}
	if done, err := m3.DeleteMachine(ctx, machine1); err != nil || done {
		t.Errorf("delete %s while its host is provisioned: done %v, %v; want waiting", machine1, done, err)
	}
	if st, err := m3.Reconcile(ctx, "worker-1"); err != nil || st != StateAvailable {
		t.Fatalf("worker-1: deprovisioning: %s, %v", st, err)
	}
	if done, err := m3.DeleteMachine(ctx, machine1); err != nil || !done {
		t.Fatalf("delete %s once its host is available: done %v, %v", machine1, done, err)
	}
	waitFor(ctx, t, machine1+" removed", time.Minute, func() (bool, string) {
		_, err := k.Dynamic.Resource(machineGVR).Namespace(MachineAPINamespace).Get(ctx, machine1, kube.GetOptions{})
		return kube.IsNotFound(err), fmt.Sprint(err)
	})
	t.Logf("scale down: Machine %s deleted and worker-1 deprovisioned %v after the scale", machine1, time.Since(t2).Round(time.Second))
	if got := machineHosts(ctx, t, k); !maps.Equal(got, map[string]string{machine0: MachineAPINamespace + "/worker-0"}) {
		t.Errorf("Machines after the scale down: %v, want only %s → worker-0", got, machine0)
	}
	// The machine controller deleted worker-1's Node (status.nodeRef) before the finalizer went.
	if got := nodeSet(ctx, t, k); !slices.Equal(got, baseNodes) {
		t.Errorf("Nodes after the scale down: %v, want %v (worker-1's deleted)", got, baseNodes)
	}
	h1 = getBMH(ctx, t, k, "worker-1")
	if st := dig(h1, "status", "provisioning", "state"); st != StateAvailable || dig(h1, "spec", "consumerRef") != nil {
		t.Errorf("worker-1 after the scale down: state %v, consumerRef %v; want available and none", st, dig(h1, "spec", "consumerRef"))
	}
	if _, st, _, err := lc.Domain("rehearsal-worker-1"); err != nil || st != virt.DomainShutoff {
		t.Errorf("worker-1's domain after the deprovisioning: state %v, %v; want shut off", st, err)
	}
	if live, err := lc.LiveDomain("rehearsal-worker-1"); err != nil {
		t.Error(err)
	} else if iso, _ := liveCDROM(live); iso != "" {
		t.Errorf("worker-1's CD-ROM still holds %s after the deprovisioning", iso)
	}
	// The kept worker: its host untouched and its Node Ready.
	if st, err := m3.Reconcile(ctx, "worker-0"); err != nil || st != StateProvisioned {
		t.Errorf("worker-0 after the scale down: %s, %v", st, err)
	}
	if _, st, _, _ := lc.Domain("rehearsal-worker-0"); st != virt.DomainRunning {
		t.Errorf("worker-0's domain after the scale down: state %v, want running", st)
	}
	if ready, _, err := kube.NodesReady(ctx, k.Dynamic, []string{"worker-0." + labDomain}); err != nil || len(ready) != 1 {
		t.Errorf("worker-0's Node after the scale down: ready %v, %v", ready, err)
	}
	if got := nodeSet(ctx, t, k); !slices.Equal(got, baseNodes) {
		t.Errorf("Nodes at the end: %v, want %v (worker-1's not back)", got, baseNodes)
	}
}

// inspected writes host's status.hardware as the IPA ramdisk's inspection would report it (the
// Metal3 stand-in skips inspection): one NIC with the address the node has, and its hostname.
// A field manager of its own, so the stand-in's status writes keep it.
func inspected(ctx context.Context, t *testing.T, k *kube.Clients, host, ip string) {
	t.Helper()
	body := fmt.Sprintf(`{"status":{"hardware":{"hostname":%q,"nics":[{"name":"enp1s0","ip":%q}]}}}`, host, ip)
	if _, err := k.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace).Patch(ctx, host, kube.MergePatchType, []byte(body),
		kube.PatchOptions{FieldManager: "inspection"}, "status"); err != nil {
		t.Fatalf("host %s: inspection data: %v", host, err)
	}
}

// nodeSet is the sorted names of the cluster's Nodes (kubectl get nodes).
func nodeSet(ctx context.Context, t *testing.T, k *kube.Clients) []string {
	t.Helper()
	l, err := k.Dynamic.Resource(kube.Nodes).List(ctx, kube.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return nodeNames(l.Items)
}

// checkMachine: Machine name is what the MachineSet controller makes from ms's template
// (generateName, labels, providerSpec, ms as controller owner).
func checkMachine(ctx context.Context, t *testing.T, k *kube.Clients, ms *kube.Unstructured, name string) {
	t.Helper()
	m, err := k.Dynamic.Resource(machineGVR).Namespace(MachineAPINamespace).Get(ctx, name, kube.GetOptions{})
	if err != nil {
		t.Fatalf("machine %s: %v", name, err)
	}
	if want := ms.GetName() + "-"; !strings.HasPrefix(name, want) || dig(m.Object, "metadata", "generateName") != want {
		t.Errorf("machine %s: generateName %v, want %s", name, dig(m.Object, "metadata", "generateName"), want)
	}
	tl, _ := dig(ms.Object, "spec", "template", "metadata", "labels").(map[string]any)
	if !maps.Equal(m.GetLabels(), stringMap(tl)) {
		t.Errorf("machine %s: labels %v, want the template's %v", name, m.GetLabels(), tl)
	}
	if got, want := fmt.Sprint(dig(m.Object, "spec", "providerSpec")), fmt.Sprint(dig(ms.Object, "spec", "template", "spec", "providerSpec")); got != want {
		t.Errorf("machine %s: providerSpec %s, want the template's %s", name, got, want)
	}
	refs := m.GetOwnerReferences()
	if len(refs) != 1 || refs[0].Kind != "MachineSet" || refs[0].Name != ms.GetName() || refs[0].UID != ms.GetUID() || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("machine %s: ownerReferences %+v, want MachineSet %s as controller", name, refs, ms.GetName())
	}
}

// machineHosts maps each Machine in openshift-machine-api to its HostAnnotation.
func machineHosts(ctx context.Context, t *testing.T, k *kube.Clients) map[string]string {
	t.Helper()
	l, err := k.Dynamic.Resource(machineGVR).Namespace(MachineAPINamespace).List(ctx, kube.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range l.Items {
		out[m.GetName()] = m.GetAnnotations()[HostAnnotation]
	}
	return out
}

// liveCDROM returns the file in a domain's CD-ROM and its boot order (os/boot dev values).
func liveCDROM(d *libvirtxml.Domain) (string, []string) {
	var iso string
	if d.Devices != nil {
		for _, disk := range d.Devices.Disks {
			if disk.Device == "cdrom" && disk.Source != nil && disk.Source.File != nil {
				iso = disk.Source.File.File
			}
		}
	}
	var order []string
	if d.OS != nil {
		for _, b := range d.OS.BootDevices {
			order = append(order, b.Dev)
		}
	}
	return iso, order
}

// cboTrustedCA returns cbo-trusted-ca's ca-bundle.crt.
func cboTrustedCA(ctx context.Context, t *testing.T, k *kube.Clients) string {
	t.Helper()
	cm, err := k.Dynamic.Resource(kube.ConfigMaps).Namespace(MachineAPINamespace).Get(ctx, CBOTrustedCAName, kube.GetOptions{})
	if err != nil {
		t.Fatalf("configmap %s: %v", CBOTrustedCAName, err)
	}
	b, _ := dig(cm.Object, "data", TrustedCAKey).(string)
	return b
}

// setUserCABundle sets openshift-config/user-ca-bundle's ca-bundle.crt (what a user's edit of
// the cluster's trust would do) and returns what it held.
func setUserCABundle(ctx context.Context, t *testing.T, k *kube.Clients, bundle string) string {
	t.Helper()
	cms := k.Dynamic.Resource(kube.ConfigMaps).Namespace("openshift-config")
	cm, err := cms.Get(ctx, "user-ca-bundle", kube.GetOptions{})
	if err != nil {
		t.Fatalf("configmap openshift-config/user-ca-bundle: %v", err)
	}
	data, _ := cm.Object["data"].(map[string]any)
	old, _ := data[TrustedCAKey].(string)
	data[TrustedCAKey] = bundle
	if _, err := cms.Update(ctx, cm, kube.UpdateOptions{}); err != nil {
		t.Fatalf("update user-ca-bundle: %v", err)
	}
	return old
}

func getBMH(ctx context.Context, t *testing.T, k *kube.Clients, name string) map[string]any {
	t.Helper()
	h, err := k.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace).Get(ctx, name, kube.GetOptions{})
	if err != nil {
		t.Fatalf("baremetalhost %s: %v", name, err)
	}
	return h.Object
}

func mkSecret(ctx context.Context, t *testing.T, k *kube.Clients, name string, data map[string]string) {
	t.Helper()
	d := map[string]any{}
	for key, v := range data {
		d[key] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	o := &kube.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "namespace": MachineAPINamespace}, "type": "Opaque", "data": d}}
	if _, err := k.Dynamic.Resource(secretGVR).Namespace(MachineAPINamespace).Create(ctx, o, kube.CreateOptions{}); err != nil {
		t.Fatalf("secret %s: %v", name, err)
	}
}

// setSecret replaces Secret name's data (what the MCO does when it rewrites the user data).
func setSecret(ctx context.Context, t *testing.T, k *kube.Clients, name string, data map[string]string) {
	t.Helper()
	secrets := k.Dynamic.Resource(secretGVR).Namespace(MachineAPINamespace)
	o, err := secrets.Get(ctx, name, kube.GetOptions{})
	if err != nil {
		t.Fatalf("secret %s: %v", name, err)
	}
	d := map[string]any{}
	for key, v := range data {
		d[key] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	o.Object["data"] = d
	if _, err := secrets.Update(ctx, o, kube.UpdateOptions{}); err != nil {
		t.Fatalf("secret %s: %v", name, err)
	}
}

func mkBMH(ctx context.Context, t *testing.T, k *kube.Clients, name, secret, addr string) {
	t.Helper()
	o := &kube.Unstructured{Object: map[string]any{"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
		"metadata": map[string]any{"name": name, "namespace": MachineAPINamespace},
		"spec": map[string]any{"online": true, "bootMACAddress": "52:54:00:ff:00:01",
			"bmc": map[string]any{"address": addr, "credentialsName": secret}}}}
	if _, err := k.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace).Create(ctx, o, kube.CreateOptions{}); err != nil {
		t.Fatalf("baremetalhost %s: %v", name, err)
	}
}

// machineAPICRD is openshift/api's machine/v1beta1 CRD in file (the MachineSet's
// 0000_10_machine-api_01_machinesets-Default.crd.yaml, the Machine's
// 0000_10_machine-api_01_machines-Default.crd.yaml: what the CVO applies from the payload), with
// the CEL rules kube-apiserver 1.30 cannot compile dropped (cel.go).
func machineAPICRD(file string) ([]byte, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api")
	cmd.Dir = repo.Root()
	dir, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "machine", "v1beta1", "zz_generated.crd-manifests", file))
	if err != nil {
		return nil, err
	}
	b, _, err = DropCEL131(b)
	return b, err
}
