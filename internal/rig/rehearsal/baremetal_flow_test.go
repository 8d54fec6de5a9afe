package rehearsal

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stmcginnis/gofish/redfish"

	"github.com/labbuild/labbuild/internal/rig/repo"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/virt"
)

// TestBaremetalFlow is TestInClusterFlow (3 masters + 1 worker, keepalived and haproxy on the
// nodes) with platform: baremetal: `labbuild cluster` from an empty directory to cluster/done,
// killed in cluster/masters and rerun, destroyed twice, as rehearsalFlow does for every
// topology. labbuild brings up the bootstrap and the masters the hard way, defines worker-0
// empty (no Ignition, an empty disk) and runs bmc/service, its Redfish BMC, in the lab's
// namespace; bmc/manifests' BareMetalHosts and Secrets and the worker MachineSet reach the
// cluster through cluster/bootstrap (the CVO stand-in applies the machine-api namespace and
// the BareMetalHost, Provisioning and MachineSet CRDs and the empty cbo-trusted-ca ConfigMap, as
// the cluster-baremetal-operator and the CVO would), and cluster/pivot unpauses the worker hosts
// once the bootstrap is off.
//
// The Metal3 stand-in (metal3.go) runs on master-0, in its network namespace, as the metal3 pod
// runs host-networked on a master: it reaches the BMC on the host's lab-bridge address through
// the host firewall that host/firewall opened for it, and serves its media on master-0's
// address. It does Metal3's part from the cluster alone: it refuses
// the worker host while it is paused, registers it through the BMC at its spec.bmc.address
// with its credentials Secret, verifying the BMC's certificate against cbo-trusted-ca, which the
// network operator's stand-in (cno.go) fills from the Proxy's trustedCA (labbuild's
// user-ca-bundle, holding pki/ca/bmc on this platform), claims it for a Machine of the worker MachineSet (CAPBM, with the
// MachineSet controller's replicas), and drives the worker VM by Ironic's redfish-virtualmedia
// sequence (eject, insert the user data's media, one-time boot from Cd, power on). The domain
// start becomes the worker node (Watch): its Ignition is read from the CD-ROM in the domain's
// live XML, which must be first in its boot order; its real kubelet joins and labbuild's
// cluster/workers — which starts no worker on this platform — approves its CSRs and waits for
// it Ready.
//
// After cluster/done: every BareMetalHost is there (the masters externally provisioned), each
// worker host is provisioned for its Machine as the stand-in reports, the BMC answers for each
// worker VM (gofish, HTTPS verified with the lab's BMC CA, the credentials from the host's
// Secret: its System is the domain's UUID, powered on, the stand-in's media inserted), the
// worker booted with the user-data Secret's bytes, and its Node is Ready under its DHCP name.
//
// Issue 38: the media is served over HTTPS with Ironic's own metal3-ironic CA, which the BMC
// must not verify (IronicMediaTLS, stall 4); the user data is the MCO's pointer config, which the
// in-cluster MCO stand-in writes to worker-user-data-managed, and the worker's Ignition fetches
// its config from the machine-config-server stand-in on the masters (mcs.go, ResolvePointer) and
// takes its address and short name from the lab network's DHCP reservation (DHCPLease): its Node
// is worker-0, which cluster/workers must approve as the machine approver does (stall 5).
func TestBaremetalFlow(t *testing.T) {
	rehearsalFlow(t, flowTopology{masters: 3, workers: 1, inCluster: true, baremetal: true})
}

// baremetalLab switches the flow's lab.yaml (already in-cluster: platform baremetal needs it) to
// platform: baremetal.
func baremetalLab(t *testing.T, lab string, topo flowTopology) string {
	t.Helper()
	if !topo.inCluster || !strings.Contains(lab, "loadBalancer: in-cluster") {
		t.Fatal("platform: baremetal needs network.loadBalancer: in-cluster")
	}
	return "platform: baremetal\n" + lab
}

// applyMachineAPI is the CVO stand-in's and the cluster-baremetal-operator's part on platform
// baremetal: the openshift-machine-api namespace (the machine-api-operator's manifests), the
// MachineSet CRD (openshift/api, from the payload) and the BareMetalHost CRD (the
// cluster-baremetal-operator's, targets/testdata/baremetal). cluster/bootstrap applies
// bmc/manifests' hosts, Secrets and MachineSet once they exist. The Provisioning CRD is
// CVOStandinCRDs'.
func applyMachineAPI(ctx context.Context, k *kube.Clients) error {
	files := map[string][]byte{"00-namespace.yaml": []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + MachineAPINamespace + "\n")}
	b, err := os.ReadFile(filepath.Join(repo.Root(), "targets", "testdata", "baremetal", "metal3.io_baremetalhosts.crd.yaml"))
	if err != nil {
		return err
	}
	files["metal3.io_baremetalhosts.crd.yaml"] = b
	files[CBOTrustedCAFile] = CBOTrustedCA // the cluster-baremetal-operator's, empty until the CNO injects
	for _, f := range []string{"0000_10_machine-api_01_machinesets-Default.crd.yaml", "0000_10_machine-api_01_machines-Default.crd.yaml"} {
		if files[f], err = machineAPICRD(f); err != nil {
			return err
		}
	}
	return applyFiles(ctx, k, files)
}

// baremetalFlow is the platform-baremetal part of rehearsalFlow: the Metal3 stand-in's loop
// (with the MachineSet controller's and the MCO's small parts) and what the worker nodes
// booted from.
type baremetalFlow struct {
	r       *rig
	fl      *flowLog
	workers []string
	media   net.Listener

	mu       sync.Mutex
	m3       *Metal3Standin
	trust    *x509.CertPool
	userData []byte
	claims   map[string]string // Machine → host
	hardware map[string]bool   // hosts whose inspection data the flow wrote (inspect)
	noted    map[string]string // host → last state or error logged

	bootMu sync.Mutex        // Watch's goroutine writes booted while a pass may run
	booted map[string][]byte // worker → the Ignition on the media it started with
}

// flowLogWriter turns the stand-in's log lines into the flow's log.
type flowLogWriter struct{ fl *flowLog }

func (w flowLogWriter) Write(b []byte) (int, error) {
	w.fl.logf("%s", strings.TrimSpace(string(b)))
	return len(b), nil
}

// ironicNode and ironicMedia are where the Metal3 stand-in runs: on master-0, in its network
// namespace, as the metal3 pod runs host-networked on a master, and its media served over HTTPS
// on Ironic's virtual-media TLS port there (IronicVMediaTLSPort, with Ironic's own CA:
// IronicMediaTLS). So it reaches the BMC on the host's lab bridge address through the host's
// firewall, which host/firewall opens for it, and the BMC fetches the media as a real one does,
// from a server whose CA it has never seen (issue 38, stall 4).
const (
	ironicNode  = "master-0"
	ironicMedia = master0IP + ":6183"
)

// startBaremetalFlow runs the Metal3 stand-in's passes every 5 s until ctx ends (the first
// once master-0 runs and the BMC CA is built).
func startBaremetalFlow(ctx context.Context, t *testing.T, r *rig, fl *flowLog, workers []string) *baremetalFlow {
	t.Helper()
	b := &baremetalFlow{r: r, fl: fl, workers: workers,
		claims: map[string]string{}, hardware: map[string]bool{}, booted: map[string][]byte{}, noted: map[string]string{}}
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.media != nil {
			b.media.Close()
		}
	})
	go func() {
		for ctx.Err() == nil {
			b.pass(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}()
	return b
}

func (b *baremetalFlow) note(host, what string) {
	if b.noted[host] != what {
		b.noted[host] = what
		b.fl.logf("metal3 stand-in: %s: %s", host, what)
	}
}

// pass is one round of the cluster's Metal3 as the stand-in plays it: BMO's reconcile of each
// host that is not externally provisioned (the masters are: BMO only manages their power, not
// stood in for), then, once a host is available, the MachineSet controller's Machines
// (MachineSetStandin.Sync: Machine objects for spec.replicas) each claimed by CAPBM (ClaimHost), and
// the next reconcile provisions the claimed host through its BMC.
func (b *baremetalFlow) pass(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k, err := b.r.clients()
	if err != nil {
		return
	}
	if b.m3 == nil {
		b.r.mu.Lock()
		nd := b.r.nodes[ironicNode]
		b.r.mu.Unlock()
		// The test's own trust in the BMC (connect, after done); Ironic's comes from the
		// cluster (cbo-trusted-ca, Metal3Standin.ironicTrust).
		ca, err := os.ReadFile(filepath.Join(b.r.lab, "out", "pki", "ca", "bmc", "tls.crt"))
		if nd == nil || err != nil {
			return
		}
		tc, err := IronicMediaTLS("") // labbuild's Provisioning: provisioningNetwork Disabled, no provisioningIP
		if err != nil {
			b.note("httpd", err.Error())
			return
		}
		ln, err := ListenIn(nd.NetNS, ironicMedia)
		if err != nil {
			b.note("httpd", err.Error())
			return
		}
		b.media, b.trust = ln, x509.NewCertPool()
		b.trust.AppendCertsFromPEM(ca)
		b.m3 = &Metal3Standin{Kube: k, Dial: DialIn(nd.NetNS), Trust: b.trust, Media: tls.NewListener(ln, tc),
			MediaURL: "https://" + ironicMedia, Log: flowLogWriter{b.fl}}
		b.fl.logf("metal3 stand-in: runs on %s (Ironic's virtual media over HTTPS on %s, its own metal3-ironic CA)", ironicNode, ironicMedia)
	}
	// The network operator's part: cbo-trusted-ca filled from the Proxy's trustedCA (cno.go).
	if changed, err := (&TrustedCAInjector{Kube: k}).Inject(ctx); err != nil {
		b.note("cno", err.Error())
	} else if len(changed) > 0 {
		b.fl.logf("CNO stand-in: injected the trusted CA bundle into %v", changed)
	}
	list, err := k.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace).List(ctx, kube.ListOptions{})
	if err != nil {
		return
	}
	available := 0
	for _, h := range list.Items {
		if ext, _ := dig(h.Object, "spec", "externallyProvisioned").(bool); ext {
			continue
		}
		st, err := b.m3.Reconcile(ctx, h.GetName())
		switch {
		case errors.Is(err, ErrPaused):
			b.note(h.GetName(), "paused")
		case err != nil:
			b.note(h.GetName(), err.Error())
		default:
			b.note(h.GetName(), st)
			available++
		}
	}
	if available == 0 {
		return
	}
	if b.userData == nil {
		// The MCO's part: worker-user-data-managed holds its pointer config, written by the
		// in-cluster MCO stand-in (mcoincluster.go syncServer); Metal3 waits for it.
		sec, err := k.Dynamic.Resource(secretGVR).Namespace(MachineAPINamespace).Get(ctx, manifests.WorkerUserDataSecret, kube.GetOptions{})
		if err != nil {
			b.note("user data", err.Error())
			return
		}
		s, _, _ := kube.NestedString(sec.Object, "data", "userData")
		ud, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(ud) == 0 {
			b.note("user data", fmt.Sprintf("Secret %s has no userData (%v)", manifests.WorkerUserDataSecret, err))
			return
		}
		b.userData = ud
		b.fl.logf("MCO stand-in: Secret %s/%s holds the pointer config (%d bytes)", MachineAPINamespace, manifests.WorkerUserDataSecret, len(ud))
	}
	sets, err := k.Dynamic.Resource(machineSet).Namespace(MachineAPINamespace).List(ctx, kube.ListOptions{})
	if err != nil {
		return
	}
	msc := &MachineSetStandin{Kube: k, Log: flowLogWriter{b.fl}}
	for _, ms := range sets.Items {
		if _, _, err := msc.Sync(ctx, ms.GetName()); err != nil {
			b.note(ms.GetName(), err.Error())
			continue
		}
	}
	machines, err := k.Dynamic.Resource(machineGVR).Namespace(MachineAPINamespace).List(ctx, kube.ListOptions{})
	if err != nil {
		return
	}
	for _, m := range machines.Items {
		machine := m.GetName()
		if _, ok := b.claims[machine]; ok {
			continue
		}
		host, err := b.m3.ClaimHost(ctx, machine)
		if err != nil {
			b.note(machine, err.Error())
			continue
		}
		b.claims[machine] = host
	}
	// CAPBM's Update (its addresses from the host's inspection data) and the node link: the
	// Machine gets InternalDNS worker-0, by which the machine approver (cluster/workers) finds
	// it for worker-0's client CSR, and status.nodeRef, by which it approves the serving CSR.
	for _, machine := range slices.Sorted(maps.Keys(b.claims)) {
		host := b.claims[machine]
		if !b.hardware[host] {
			if err := b.inspect(ctx, k, host); err != nil {
				b.note(host, err.Error())
				continue
			}
			b.hardware[host] = true
		}
		if err := b.m3.UpdateMachine(ctx, machine); err != nil {
			b.note(machine, err.Error())
		}
	}
	if _, err := (&NodeLinkStandin{Kube: k, Log: flowLogWriter{b.fl}}).Sync(ctx); err != nil {
		b.note("node link", err.Error())
	}
}

// inspect writes host's status.hardware as the IPA ramdisk's inspection reports it (the Metal3
// stand-in skips inspection, metal3.go): the ramdisk boots on the lab network like the node
// after it, so its one NIC, the host's spec.bootMACAddress, has the address and its host name
// is the short name of the network's DHCP reservation for that MAC (DHCPLease). A field
// manager of its own, so the stand-in's status writes keep it.
func (b *baremetalFlow) inspect(ctx context.Context, k *kube.Clients, host string) error {
	h, err := k.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace).Get(ctx, host, kube.GetOptions{})
	if err != nil {
		return err
	}
	mac, _ := dig(h.Object, "spec", "bootMACAddress").(string)
	c, err := virt.Connect(b.r.lv.URI("qemu:///system"))
	if err != nil {
		return err
	}
	defer c.Close()
	n, _, found, err := c.Network("rehearsal")
	if err != nil || !found {
		return fmt.Errorf("inspection of %s: the lab network: %v (found %v)", host, err, found)
	}
	lease, name, err := DHCPLease(n, mac)
	if err != nil {
		return fmt.Errorf("inspection of %s: %w", host, err)
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"hardware": map[string]any{
		"hostname": name, "nics": []any{map[string]any{"name": "enp1s0", "mac": mac, "ip": lease.IP}}}}})
	if err != nil {
		return err
	}
	if _, err := k.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace).Patch(ctx, host, kube.MergePatchType, body,
		kube.PatchOptions{FieldManager: "inspection"}, "status"); err != nil {
		return fmt.Errorf("inspection of %s: %w", host, err)
	}
	b.fl.logf("inspection stand-in: %s: NIC %s %s, host name %q (the lab network's DHCP reservation)", host, mac, lease.IP, name)
	return nil
}

// bootFromMedia is Watch's Up for a worker the BMC started: the Ignition is config.ign on the
// media in the domain's CD-ROM (MediaIgnition), which the live XML must have first in its boot
// order; a domain started any other way (by labbuild, without media) fails.
func (b *baremetalFlow) bootFromMedia(node string) (*Node, error) {
	c, err := virt.Connect(b.r.lv.URI("qemu:///system"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	live, err := c.LiveDomain("rehearsal-" + node)
	if err != nil {
		return nil, err
	}
	iso, order := liveCDROM(live)
	if iso == "" || len(order) == 0 || order[0] != "cdrom" {
		return nil, fmt.Errorf("%s started without virtual media first in its boot order (CD-ROM %q, order %v): not by the BMC", node, iso, order)
	}
	ign, err := MediaIgnition(iso)
	if err != nil {
		return nil, err
	}
	b.bootMu.Lock()
	b.booted[node] = ign
	b.bootMu.Unlock()
	b.fl.logf("%s: Ignition (%d bytes) from the virtual media %s", node, len(ign), iso)
	// Ignition's fetch of the pointer config's merge source, the machine-config-server behind
	// the API VIP, from the lab network (pointer.go).
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	full, merged, err := ResolvePointer(ctx, ign, DialIn(b.r.labNS))
	if err != nil {
		return nil, err
	}
	if !merged {
		return b.r.bootIgnition(node, ign)
	}
	b.fl.logf("%s: Ignition merged the machine-config-server's config (%d bytes)", node, len(full))
	// NetworkManager's DHCP: the network's reservation for the domain's MAC.
	var mac string
	if live.Devices != nil {
		for _, i := range live.Devices.Interfaces {
			if i.MAC != nil {
				mac = i.MAC.Address
			}
		}
	}
	n, _, found, err := c.Network("rehearsal")
	if err != nil || !found {
		return nil, fmt.Errorf("%s: the lab network: %v (found %v)", node, err, found)
	}
	lease, name, err := DHCPLease(n, mac)
	if err != nil {
		return nil, err
	}
	b.fl.logf("%s: DHCP lease %s/%d, host name %q", node, lease.IP, lease.Prefix, name)
	return b.r.bootIgnitionNet(node, full, lease, name)
}

// serveMCS runs the machine-config-server stand-in on master nd (host network, port 22623,
// as the DaemonSet runs on every master) once the objects it serves from exist.
func serveMCS(ctx context.Context, r *rig, nd *Node, fl *flowLog) {
	for ctx.Err() == nil {
		k, err := r.clients()
		if err == nil {
			var infra *kube.Unstructured
			if infra, err = k.Dynamic.Resource(configGVR("infrastructures")).Get(ctx, "cluster", kube.GetOptions{}); err == nil {
				u, _ := dig(infra.Object, "status", "apiServerInternalURI").(string)
				m := &MCSStandin{Kube: k.Dynamic, APIServerURL: u, Logf: fl.logf}
				var ln net.Listener
				if _, err = objectData(ctx, k.Dynamic, secrets, MCONamespace, "machine-config-server-tls", mcsReader, "tls.crt"); err == nil {
					if ln, err = ListenIn(nd.NetNS, ":22623"); err == nil {
						fl.logf("MCS stand-in: serves on %s:22623", nd.Name)
						context.AfterFunc(ctx, func() { ln.Close() })
						err = m.Serve(ctx, ln)
						if ctx.Err() != nil {
							return
						}
						ln.Close()
					}
				}
			}
		}
		fl.logf("MCS stand-in on %s: %v", nd.Name, err)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
	}
}

// afterDone checks platform baremetal after cluster/done (TestBaremetalFlow's doc).
func (b *baremetalFlow) afterDone(ctx context.Context, t *testing.T, masters []string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	k, err := b.r.clients()
	if err != nil {
		t.Errorf("admin client: %v", err)
		return
	}
	list, err := k.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace).List(ctx, kube.ListOptions{})
	if err != nil {
		t.Errorf("BareMetalHosts after cluster/done: %v", err)
		return
	}
	var names []string
	for _, h := range list.Items {
		names = append(names, h.GetName())
		ext, _ := dig(h.Object, "spec", "externallyProvisioned").(bool)
		if slices.Contains(masters, h.GetName()) != ext {
			t.Errorf("BareMetalHost %s: externallyProvisioned %v (the masters are labbuild's, the workers Metal3's)", h.GetName(), ext)
		}
	}
	slices.Sort(names)
	if want := append(slices.Clone(masters), b.workers...); !slices.Equal(names, want) {
		t.Errorf("BareMetalHosts after cluster/done: %v, want %v", names, want)
	}
	machineOf := map[string]string{}
	for m, h := range b.claims {
		machineOf[h] = m
	}
	lc, err := virt.Connect(b.r.lv.URI("qemu:///system"))
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	for _, w := range b.workers {
		h := getBMH(ctx, t, k, w)
		ann, _ := dig(h, "metadata", "annotations").(map[string]any)
		if _, paused := ann[manifests.BMHPausedAnnotation]; paused {
			t.Errorf("%s: still paused after cluster/done", w)
		}
		if st := dig(h, "status", "provisioning", "state"); st != StateProvisioned {
			t.Errorf("%s: status.provisioning.state %v, want %s (errorMessage %q)", w, st, StateProvisioned, dig(h, "status", "errorMessage"))
		}
		if ref, _ := dig(h, "spec", "consumerRef", "name").(string); ref == "" || ref != machineOf[w] {
			t.Errorf("%s: consumerRef %q, want the Machine the stand-in claimed it for (%q)", w, ref, machineOf[w])
		}
		// The BMC answers for the worker VM: its System at the host's address, over HTTPS
		// verified with the lab's BMC CA, with the host's credentials Secret.
		d, _, found, err := lc.Domain("rehearsal-" + w)
		if err != nil || !found {
			t.Errorf("domain rehearsal-%s: %v (found %v)", w, err, found)
			continue
		}
		hu := &kube.Unstructured{Object: h}
		user, pass, err := b.m3.credentials(ctx, hu)
		if err != nil {
			t.Errorf("%s: %v", w, err)
			continue
		}
		endpoint, system, err := parseBMCAddress(dig(h, "spec", "bmc", "address").(string))
		if err != nil {
			t.Errorf("%s: %v", w, err)
			continue
		}
		c, err := b.m3.connect(endpoint, user, pass, false)
		if err != nil {
			t.Errorf("%s: BMC %s: %v", w, endpoint, err)
			continue
		}
		sys, err := redfish.GetComputerSystem(c, system)
		if err != nil {
			t.Errorf("%s: BMC %s%s: %v", w, endpoint, system, err)
			c.Logout()
			continue
		}
		if !strings.EqualFold(sys.UUID, d.UUID) || sys.PowerState != redfish.OnPowerState {
			t.Errorf("%s: the BMC's System: UUID %s power %s, want the domain's %s, On", w, sys.UUID, sys.PowerState, d.UUID)
		}
		var inserted []string
		if mgs, err := sys.ManagedBy(); err == nil {
			for _, mg := range mgs {
				vms, _ := mg.VirtualMedia()
				for _, vm := range vms {
					if vm.Inserted {
						inserted = append(inserted, vm.Image)
					}
				}
			}
		}
		if len(inserted) != 1 || !strings.HasSuffix(inserted[0], "/redfish/boot-"+w+".iso") {
			t.Errorf("%s: the BMC's inserted media %v, want the stand-in's boot-%s.iso", w, inserted, w)
		}
		c.Logout()
		t.Logf("%s: BareMetalHost provisioned for Machine %s; the BMC answers: System %s, power %s, media %v", w, machineOf[w], sys.UUID, sys.PowerState, inserted)
		b.bootMu.Lock()
		ign := b.booted[w]
		b.bootMu.Unlock()
		if !slices.Equal(ign, b.userData) || b.userData == nil {
			t.Errorf("%s booted with %d bytes of Ignition from its media, want the user-data Secret's %d", w, len(ign), len(b.userData))
		}
		// Booted from the MCO's pointer config, the worker is named by DHCP: the short name
		// (issue 38, stall 5).
		if ready, _, err := kube.NodesReady(ctx, k.Dynamic, []string{w}); err != nil || len(ready) != 1 {
			t.Errorf("Node %s (its DHCP name) not Ready after cluster/done (%v)", w, err)
		}
		// What the machine approver matched it by: the Machine's InternalDNS (CAPBM, from the
		// inspection data) and, for the serving certificate, its nodeRef (the node link).
		if mo, err := k.Dynamic.Resource(machineGVR).Namespace(MachineAPINamespace).Get(ctx, machineOf[w], kube.GetOptions{}); err != nil {
			t.Errorf("Machine %s: %v", machineOf[w], err)
		} else if addrs, ref := fmt.Sprint(dig(mo.Object, "status", "addresses")), dig(mo.Object, "status", "nodeRef", "name"); !strings.Contains(addrs, "address:"+w+" type:InternalDNS") || ref != w {
			t.Errorf("Machine %s: status.addresses %s, nodeRef %v; want InternalDNS %s and nodeRef %s", machineOf[w], addrs, ref, w, w)
		}
	}
}
