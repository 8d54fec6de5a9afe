package rehearsal

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"

	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/render/pki"
	"github.com/labbuild/labbuild/targets/kube"
)

// Metal3Standin is a stand-in for the cluster's Metal3 — the baremetal-operator (BMO) with
// Ironic, as the cluster-baremetal-operator runs them — and for the machine-api provider that
// hands it Machines (openshift/cluster-api-provider-baremetal, CAPBM). Neither can run here
// (their images are not pullable, Ironic is a Python service with a database). It reads only
// what they read: the BareMetalHost objects in openshift-machine-api, the BMC credentials
// Secret each names, the Machines (their providerSpec) and the user-data Secret it names,
// and Ironic's CA bundle, ConfigMap openshift-machine-api/cbo-trusted-ca (ironicTrust), all
// from the cluster; it reaches the BMC only at the host's spec.bmc.address, over HTTPS
// verified against that bundle, and drives it by Ironic's redfish-virtualmedia sequence with
// gofish. It fails where they fail (below, each with the upstream code it follows). It reads
// none of labbuild's files.
//
// What differs from Metal3, by design of a stand-in: Ironic boots the host from an IPA ramdisk
// ISO which then writes RHCOS to the disk with the user data (custom deploy install_coreos,
// coreos-installer); here the boot media is the user data itself in a cpio archive (MediaFile),
// and the rehearsal's node, booted from it, takes its Ignition from there (MediaIgnition).
// Registration skips hardware inspection: a host whose BMC answers becomes available.
type Metal3Standin struct {
	// Kube reads and writes the BareMetalHosts and Machines and reads the Secrets.
	Kube *kube.Clients
	// Dial opens connections to the BMC (the rehearsal: DialIn of the lab's namespace).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Trust is not Ironic's CA bundle, which Reconcile reads from the cluster (ironicTrust):
	// it is only what connect verifies with, for a test that checks the BMC itself through
	// the stand-in's client. Reconcile never uses it.
	Trust *x509.CertPool
	// Media is where the BMC downloads boot images from (Ironic's httpd): a listener the
	// stand-in serves on, and the base URL the BMC is given.
	Media    net.Listener
	MediaURL string
	// Log receives one line per step (nil: discarded).
	Log io.Writer

	mu     sync.Mutex
	images map[string][]byte
	served bool
}

// MachineAPINamespace is where the installer writes BareMetalHosts and where CAPBM lists them
// (CAPBM chooseHost lists the Machine's namespace).
const MachineAPINamespace = manifests.MachineAPINamespace

var (
	bmhGVR     = kube.GroupVersionResource{Group: "metal3.io", Version: "v1alpha1", Resource: "baremetalhosts"}
	secretGVR  = kube.GroupVersionResource{Version: "v1", Resource: "secrets"}
	machineSet = kube.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machinesets"}
)

// Host states the stand-in writes into status.provisioning.state (metal3 ProvisioningState).
const (
	StateAvailable   = "available"
	StateProvisioned = "provisioned"
)

// ErrPaused is Reconcile's answer for a paused host (manifests.BMHPausedAnnotation): nothing
// was done.
var ErrPaused = errors.New("host is paused, no work to do")

func (m *Metal3Standin) logf(format string, args ...any) {
	if m.Log != nil {
		fmt.Fprintf(m.Log, "metal3 stand-in: "+format+"\n", args...)
	}
}

// HostAnnotation is CAPBM's annotation on a Machine naming its host, "<namespace>/<name>"
// (cluster-api-provider-baremetal release-4.18 pkg/cloud/baremetal/actuators/machine/actuator.go
// HostAnnotation); InstanceStateAnnotation carries the host's provisioning state beside it
// (machine-api-operator pkg/controller/machine MachineInstanceStateAnnotationName).
const (
	HostAnnotation          = "metal3.io/BareMetalHost"
	InstanceStateAnnotation = "machine.openshift.io/instance-state"
)

// ClaimHost is the machine controller's create path for Machine machine in
// openshift-machine-api with CAPBM's Actuator.Create (cluster-api-provider-baremetal
// release-4.18 pkg/cloud/baremetal/actuators/machine/actuator.go Create): the machine
// controller first puts MachineFinalizer on the Machine (machine-api-operator
// pkg/controller/machine/controller.go Reconcile); then the providerSpec is read from the
// Machine (none: "ProviderSpec is missing"); getHost follows the Machine's HostAnnotation;
// without one chooseHost picks a host whose spec.consumerRef is this Machine, else one with no
// consumerRef, not being deleted, in state ready or available, without an error message, not
// externally provisioned, matching the providerSpec's hostSelector (first by name here, where
// CAPBM picks at random); provisionHost sets spec.customDeploy, spec.userData (namespace
// defaulting to the Machine's), spec.consumerRef and spec.online; ensureAnnotation writes
// HostAnnotation and InstanceStateAnnotation on the Machine. It returns the host's name, or an
// error when none is available (CAPBM: "No available BareMetalHost found", the Machine stays
// Provisioning) or the Machine is being deleted (the machine controller calls Delete then:
// DeleteMachine).
func (m *Metal3Standin) ClaimHost(ctx context.Context, machine string) (string, error) {
	machines := m.Kube.Dynamic.Resource(machineGVR).Namespace(MachineAPINamespace)
	mo, err := machines.Get(ctx, machine, kube.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("machine %s: %w", machine, err)
	}
	if dig(mo.Object, "metadata", "deletionTimestamp") != nil {
		return "", fmt.Errorf("machine %s is being deleted", machine)
	}
	meta := mo.Object["metadata"].(map[string]any)
	if fin, _ := meta["finalizers"].([]any); !slices.Contains(fin, any(MachineFinalizer)) {
		meta["finalizers"] = append(fin, MachineFinalizer)
		if mo, err = machines.Update(ctx, mo, kube.UpdateOptions{}); err != nil {
			return "", fmt.Errorf("machine %s: add finalizer: %w", machine, err)
		}
		meta = mo.Object["metadata"].(map[string]any)
	}
	ps, _ := dig(mo.Object, "spec", "providerSpec", "value").(map[string]any)
	if ps == nil {
		return "", fmt.Errorf("machine %s: ProviderSpec is missing (spec.providerSpec.value)", machine)
	}
	selector, _ := dig(ps, "hostSelector", "matchLabels").(map[string]any)
	hosts := m.Kube.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace)
	chosen, err := m.machineHost(ctx, mo)
	if err != nil {
		return "", err
	}
	if chosen == nil {
		list, err := hosts.List(ctx, kube.ListOptions{})
		if err != nil {
			return "", err
		}
		slices.SortFunc(list.Items, func(a, b kube.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
		for i := range list.Items {
			h := &list.Items[i]
			ref, _ := dig(h.Object, "spec", "consumerRef").(map[string]any)
			if consumerRefMatches(ref, machine) {
				chosen = h
				break
			}
			if ref != nil || dig(h.Object, "metadata", "deletionTimestamp") != nil {
				continue
			}
			if st, _ := dig(h.Object, "status", "provisioning", "state").(string); st != "ready" && st != StateAvailable {
				continue
			}
			if msg, _ := dig(h.Object, "status", "errorMessage").(string); msg != "" {
				continue
			}
			if ext, _ := dig(h.Object, "spec", "externallyProvisioned").(bool); ext {
				continue
			}
			if !labelsMatch(h.GetLabels(), selector) {
				continue
			}
			if chosen == nil {
				chosen = h
			}
		}
	}
	if chosen == nil {
		return "", fmt.Errorf("machine %s: No available BareMetalHost found in %s (CAPBM chooseHost: none ready/available, unclaimed and matching)", machine, MachineAPINamespace)
	}
	spec, _ := chosen.Object["spec"].(map[string]any)
	if cd, _ := dig(ps, "customDeploy", "method").(string); cd != "" {
		spec["customDeploy"] = map[string]any{"method": cd}
	}
	if ud, _ := ps["userData"].(map[string]any); ud != nil {
		ud = map[string]any{"name": ud["name"], "namespace": ud["namespace"]}
		if ud["namespace"] == nil || ud["namespace"] == "" {
			ud["namespace"] = MachineAPINamespace
		}
		spec["userData"] = ud
	}
	spec["consumerRef"] = map[string]any{"kind": "Machine", "name": machine, "namespace": MachineAPINamespace, "apiVersion": "machine.openshift.io/v1beta1"}
	spec["online"] = true
	if chosen, err = hosts.Update(ctx, chosen, kube.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("machine %s: claim host: %w", machine, err)
	}
	// ensureAnnotation.
	state, _ := dig(chosen.Object, "status", "provisioning", "state").(string)
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	key := MachineAPINamespace + "/" + chosen.GetName()
	if ann[HostAnnotation] != key || ann[InstanceStateAnnotation] != state {
		ann[HostAnnotation], ann[InstanceStateAnnotation] = key, state
		meta["annotations"] = ann
		if _, err := machines.Update(ctx, mo, kube.UpdateOptions{}); err != nil {
			return "", fmt.Errorf("machine %s: failed to update machine annotation: %w", machine, err)
		}
		m.logf("machine %s claimed host %s (%s)", machine, chosen.GetName(), state)
	}
	return chosen.GetName(), nil
}

// consumerRefMatches is CAPBM's consumerRefMatches for a Machine of openshift-machine-api.
func consumerRefMatches(ref map[string]any, machine string) bool {
	return ref != nil && ref["kind"] == "Machine" && ref["name"] == machine && ref["namespace"] == MachineAPINamespace &&
		ref["apiVersion"] == "machine.openshift.io/v1beta1"
}

// machineHost is CAPBM's getHost: the host the Machine's HostAnnotation names, nil when it has
// none or the host is gone.
func (m *Metal3Standin) machineHost(ctx context.Context, mo *kube.Unstructured) (*kube.Unstructured, error) {
	key, ok := mo.GetAnnotations()[HostAnnotation]
	if !ok {
		return nil, nil
	}
	ns, name, found := strings.Cut(key, "/")
	if !found || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("machine %s: annotation %s: %q is not namespace/name", mo.GetName(), HostAnnotation, key)
	}
	h, err := m.Kube.Dynamic.Resource(bmhGVR).Namespace(ns).Get(ctx, name, kube.GetOptions{})
	if kube.IsNotFound(err) {
		return nil, nil
	}
	return h, err
}

// DeleteMachine is the machine controller's delete path for Machine machine, which its
// MachineSet (or a user) deleted and MachineFinalizer keeps, with CAPBM's Actuator.Delete
// (actuator.go Delete, releaseHost; machine-api-operator pkg/controller/machine/controller.go
// Reconcile: the actuator's Delete, then the finalizer removed). One call is one pass: when the
// host still has customDeploy, image, userData or online, they are cleared (BMO then
// deprovisions it: Reconcile) and it returns false; while the host is provisioned,
// provisioning or deprovisioning it waits (false); then releaseHost clears spec.consumerRef
// and, as the machine controller does once the actuator reports the instance gone (Reconcile:
// actuator.Delete, Exists, then deleteNode for status.nodeRef), the Node that status.nodeRef
// names is deleted (already gone: fine), then the finalizer goes: the Machine is removed and it
// returns true. A Machine whose host is gone or claimed by another Machine is released at
// once. The drain that comes first upstream (the drain controller, drain_controller.go, which
// cordons the Node, evicts its pods and sets the Machine's Drained condition the machine
// controller waits for) is skipped: nothing here runs workloads on the workers to evict.
func (m *Metal3Standin) DeleteMachine(ctx context.Context, machine string) (bool, error) {
	machines := m.Kube.Dynamic.Resource(machineGVR).Namespace(MachineAPINamespace)
	mo, err := machines.Get(ctx, machine, kube.GetOptions{})
	if kube.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("machine %s: %w", machine, err)
	}
	if dig(mo.Object, "metadata", "deletionTimestamp") == nil {
		return false, fmt.Errorf("machine %s is not being deleted", machine)
	}
	h, err := m.machineHost(ctx, mo)
	if err != nil {
		return false, err
	}
	if h != nil {
		spec, _ := h.Object["spec"].(map[string]any)
		ref, _ := spec["consumerRef"].(map[string]any)
		mine := consumerRefMatches(ref, machine)
		online, _ := spec["online"].(bool)
		if mine && (spec["image"] != nil || spec["customDeploy"] != nil || spec["userData"] != nil || online) {
			delete(spec, "image")
			delete(spec, "customDeploy")
			delete(spec, "userData")
			spec["online"] = false
			if _, err := m.Kube.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace).Update(ctx, h, kube.UpdateOptions{}); err != nil && !kube.IsNotFound(err) {
				return false, fmt.Errorf("machine %s: failed to deprovision host %s: %w", machine, h.GetName(), err)
			}
			m.logf("machine %s deleted: deprovisioning host %s", machine, h.GetName())
			return false, nil
		}
		switch st, _ := dig(h.Object, "status", "provisioning", "state").(string); st {
		case "provisioning", StateProvisioned, "deprovisioning":
			if mine {
				return false, nil
			}
		}
		if mine {
			delete(spec, "consumerRef")
			if _, err := m.Kube.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace).Update(ctx, h, kube.UpdateOptions{}); err != nil && !kube.IsNotFound(err) {
				return false, fmt.Errorf("machine %s: failed to release host %s: %w", machine, h.GetName(), err)
			}
			m.logf("machine %s released host %s", machine, h.GetName())
		}
	}
	// deleteNode (controller.go): the Node of status.nodeRef, after the instance is gone.
	if node, _ := dig(mo.Object, "status", "nodeRef", "name").(string); node != "" {
		if err := m.Kube.Dynamic.Resource(kube.Nodes).Delete(ctx, node, kube.DeleteOptions{}); err != nil && !kube.IsNotFound(err) {
			return false, fmt.Errorf("machine %s: error deleting node %s for machine: %w", machine, node, err)
		}
		m.logf("machine %s deleted: deleted Node %s", machine, node)
	}
	meta := mo.Object["metadata"].(map[string]any)
	fin, _ := meta["finalizers"].([]any)
	meta["finalizers"] = slices.DeleteFunc(fin, func(f any) bool { return f == MachineFinalizer })
	if _, err := machines.Update(ctx, mo, kube.UpdateOptions{}); err != nil && !kube.IsNotFound(err) {
		return false, fmt.Errorf("machine %s: remove finalizer: %w", machine, err)
	}
	return true, nil
}

// ProviderIDForHost is CAPBM's providerIDForHost (actuator.go): the providerID of the Machine
// (and then of its Node) that host backs, "baremetalhost:///<namespace>/<name>/<uid>".
func ProviderIDForHost(h *kube.Unstructured) string {
	return fmt.Sprintf("baremetalhost:///%s/%s/%s", h.GetNamespace(), h.GetName(), h.GetUID())
}

// UpdateMachine is the machine controller's update path for an existing Machine machine with
// CAPBM's Actuator.Update (cluster-api-provider-baremetal release-4.18
// pkg/cloud/baremetal/actuators/machine/actuator.go Update), its first steps in order:
//
//   - getHost: the host of the Machine's HostAnnotation; none is an error ("host not found for
//     machine");
//   - ensureMachineProviderID: an empty spec.providerID becomes ProviderIDForHost (never
//     changed once set);
//   - ensureMachineAddresses (nodeAddresses): status.addresses from the host's inspection data,
//     status.hardware: an InternalIP per NIC's ip, and the hostname as Hostname and
//     InternalDNS; none without inspection data;
//   - ensureNodeProviderID: once the node link has set status.nodeRef, the Node's
//     spec.providerID is set to the Machine's (a Node not there yet: nothing).
//
// ensureAnnotation is ClaimHost's; remediation (remediateIfNeeded) is not stood in for. The
// Metal3 stand-in skips inspection, so status.hardware is there only when something wrote it as
// the IPA ramdisk's inspection would (the rehearsal test does, from the address the node
// has); without it the Machine gets no addresses and the node link (NodeLinkStandin) finds
// no Node for it, as upstream.
func (m *Metal3Standin) UpdateMachine(ctx context.Context, machine string) error {
	machines := m.Kube.Dynamic.Resource(machineGVR).Namespace(MachineAPINamespace)
	mo, err := machines.Get(ctx, machine, kube.GetOptions{})
	if err != nil {
		return fmt.Errorf("machine %s: %w", machine, err)
	}
	h, err := m.machineHost(ctx, mo)
	if err != nil {
		return err
	}
	if h == nil {
		return fmt.Errorf("host not found for machine %s", machine)
	}
	pid, _ := dig(mo.Object, "spec", "providerID").(string)
	if pid == "" {
		pid = ProviderIDForHost(h)
		spec, _ := mo.Object["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
			mo.Object["spec"] = spec
		}
		spec["providerID"] = pid
		if mo, err = machines.Update(ctx, mo, kube.UpdateOptions{}); err != nil {
			return fmt.Errorf("machine %s: failed to set machine provider id: %w", machine, err)
		}
		m.logf("machine %s: providerID %s", machine, pid)
	}
	addrs := []any{}
	nics, _ := dig(h.Object, "status", "hardware", "nics").([]any)
	for _, n := range nics {
		if ip, _ := n.(map[string]any)["ip"].(string); ip != "" {
			addrs = append(addrs, map[string]any{"type": "InternalIP", "address": ip})
		}
	}
	if hn, _ := dig(h.Object, "status", "hardware", "hostname").(string); hn != "" {
		addrs = append(addrs, map[string]any{"type": "Hostname", "address": hn}, map[string]any{"type": "InternalDNS", "address": hn})
	}
	have, _ := dig(mo.Object, "status", "addresses").([]any)
	if fmt.Sprint(have) != fmt.Sprint(addrs) {
		body, _ := json.Marshal(map[string]any{"status": map[string]any{"addresses": addrs}})
		if _, err := machines.Patch(ctx, machine, kube.MergePatchType, body, kube.PatchOptions{}, "status"); err != nil {
			return fmt.Errorf("machine %s: failed to update machine addresses: %w", machine, err)
		}
	}
	node, _ := dig(mo.Object, "status", "nodeRef", "name").(string)
	if node == "" {
		return nil
	}
	n, err := m.Kube.Dynamic.Resource(kube.Nodes).Get(ctx, node, kube.GetOptions{})
	if kube.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("machine %s: get Node %s: %w", machine, node, err)
	}
	if have, _ := dig(n.Object, "spec", "providerID").(string); have != pid {
		body, _ := json.Marshal(map[string]any{"spec": map[string]any{"providerID": pid}})
		if _, err := m.Kube.Dynamic.Resource(kube.Nodes).Patch(ctx, node, kube.MergePatchType, body, kube.PatchOptions{}); err != nil {
			return fmt.Errorf("machine %s: failed to set node provider id: %w", machine, err)
		}
		m.logf("machine %s: Node %s providerID %s", machine, node, pid)
	}
	return nil
}

func labelsMatch(have map[string]string, want map[string]any) bool {
	for k, v := range want {
		if have[k] != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

// Reconcile is one pass of BMO's BareMetalHostReconciler over host, with Ironic's part done
// through the BMC:
//
//   - a host with manifests.BMHPausedAnnotation: ErrPaused, nothing read or written (Reconcile: "host is
//     paused, no work to do");
//   - the BMC credentials: spec.bmc.credentialsName must name a Secret in the host's namespace
//     with non-empty username and password (buildAndValidateBMCCredentials: a missing Secret is
//     ResolveBMCSecretRefError, an empty field bmc.CredentialsValidationError "Missing BMC
//     connection detail 'username' in credentials"); spec.bmc.address must parse as a
//     redfish(-virtualmedia)+https URL (pkg/hardwareutils/bmc/redfish.go);
//   - registration: Ironic gets the System at the address (sushy; a 401 or an unknown system
//     fails it), over TLS verified against cbo-trusted-ca (ironicTrust) unless the host sets
//     spec.bmc.disableCertificateVerification (BMO pkg/hardwareutils/bmc/redfish.go DriverInfo:
//     redfish_verify_ca false); the host becomes available (inspection is not stood in for);
//   - provisioning, once a consumer has set spec.userData (CAPBM): the user data from the
//     Secret's "userData" key, else "value" (host_config_data.go getSecretData), goes on the
//     media; Ironic's redfish-virtualmedia boot (ironic/drivers/modules/redfish/boot.py
//     _eject_vmedia, _insert_vmedia; management.py set_boot_device CDROM persistent=False;
//     power.py reboot: On when off, else ForceRestart), then the System and its media read back;
//     the host becomes provisioned;
//   - deprovisioning, once the consumer has taken spec.customDeploy and spec.image away from a
//     provisioned host (CAPBM Delete; host_state_machine.go handleProvisioned,
//     provisioningCancelled): BMO's actionDeprovisioning calls the Ironic provisioner's
//     Deprovision, which moves the Ironic node from active to deleted (ironic.go Deprovision:
//     changeNodeProvisionState TargetDeleted); Ironic's tear down powers the node off and its
//     redfish-virtualmedia boot interface's clean_up_instance ejects the media (tearDown);
//     BMO's handleDeprovisioning moves the host to available. spec.consumerRef stays until CAPBM
//     releases the host. Ironic's automated cleaning (automatedCleaningMode metadata, the CRD's
//     default: IPA booted from virtual media wipes the disks' metadata, then power off and
//     eject) is not stood in for; it ends in the same state.
//
// A failure is written to status (errorType registration error / provisioning error and the
// message, as setErrorCondition does) and returned. It returns the host's new state.
func (m *Metal3Standin) Reconcile(ctx context.Context, host string) (string, error) {
	hosts := m.Kube.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace)
	h, err := hosts.Get(ctx, host, kube.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("baremetalhost %s: %w", host, err)
	}
	if _, ok := h.GetAnnotations()[manifests.BMHPausedAnnotation]; ok {
		return "", ErrPaused
	}
	state, _ := dig(h.Object, "status", "provisioning", "state").(string)
	fail := func(errType string, err error) (string, error) {
		err = fmt.Errorf("baremetalhost %s: %w", host, err)
		m.setStatus(ctx, host, state, errType, err.Error())
		return state, err
	}
	user, pass, err := m.credentials(ctx, h)
	if err != nil {
		return fail("registration error", err)
	}
	addr, _ := dig(h.Object, "spec", "bmc", "address").(string)
	endpoint, system, err := parseBMCAddress(addr)
	if err != nil {
		return fail("registration error", err)
	}
	insecure, _ := dig(h.Object, "spec", "bmc", "disableCertificateVerification").(bool)
	var trust *x509.CertPool
	var trustNote string
	if !insecure {
		if trust, trustNote, err = m.ironicTrust(ctx); err != nil {
			return fail("registration error", err)
		}
	}
	c, err := m.connectWith(endpoint, user, pass, trust, insecure)
	if err != nil {
		if trustNote != "" {
			err = fmt.Errorf("%w (Ironic's CA bundle: %s)", err, trustNote)
		}
		return fail("registration error", fmt.Errorf("BMC %s: %w", endpoint, err))
	}
	defer c.Logout()
	sys, err := redfish.GetComputerSystem(c, system)
	if err != nil {
		return fail("registration error", fmt.Errorf("BMC %s: system %s: %w", endpoint, system, err))
	}
	if state == "" || state == "registering" {
		state = StateAvailable
		m.logf("host %s registered: %s %s, power %s", host, endpoint, system, sys.PowerState)
	}
	if state == StateProvisioned && provisioningCancelled(h) {
		if err := tearDown(sys); err != nil {
			return fail("provisioning error", fmt.Errorf("BMC %s: deprovision: %w", endpoint, err))
		}
		if sys, err = redfish.GetComputerSystem(c, system); err != nil {
			return fail("provisioning error", err)
		}
		if sys.PowerState != redfish.OffPowerState {
			return fail("provisioning error", fmt.Errorf("BMC %s: power state %s after the tear down, want Off", endpoint, sys.PowerState))
		}
		m.unpublish(host)
		state = StateAvailable
		m.setStatus(ctx, host, state, "", "")
		m.logf("host %s deprovisioned: powered off, virtual media ejected, available", host)
		return state, nil
	}
	ud, _ := dig(h.Object, "spec", "userData").(map[string]any)
	if ud == nil || dig(h.Object, "spec", "consumerRef") == nil || state == StateProvisioned {
		m.setStatus(ctx, host, state, "", "")
		return state, nil
	}
	name, _ := ud["name"].(string)
	ns, _ := ud["namespace"].(string)
	if ns == "" {
		ns = MachineAPINamespace
	}
	if ns != MachineAPINamespace {
		return fail("provisioning error", fmt.Errorf("userData secret must be in same namespace as host %s/%s", MachineAPINamespace, host))
	}
	data, err := m.secretData(ctx, name, "userData")
	if err != nil {
		return fail("provisioning error", err)
	}
	image := m.publish(host, MediaFile(data))
	if err := virtualMediaBoot(c, sys, image); err != nil {
		return fail("provisioning error", fmt.Errorf("BMC %s: %w", endpoint, err))
	}
	// Read back, as Ironic's conductor does after the power action (power state sync).
	sys, err = redfish.GetComputerSystem(c, system)
	if err != nil {
		return fail("provisioning error", err)
	}
	if sys.PowerState != redfish.OnPowerState {
		return fail("provisioning error", fmt.Errorf("BMC %s: power state %s after the boot, want On", endpoint, sys.PowerState))
	}
	state = StateProvisioned
	m.setStatus(ctx, host, state, "", "")
	m.logf("host %s provisioned: %s inserted, one-time boot from Cd, powered on", host, image)
	return state, nil
}

// credentials resolves spec.bmc.credentialsName (BMO buildAndValidateBMCCredentials,
// bmc.Credentials.Validate).
func (m *Metal3Standin) credentials(ctx context.Context, h *kube.Unstructured) (string, string, error) {
	name, _ := dig(h.Object, "spec", "bmc", "credentialsName").(string)
	if name == "" {
		return "", "", errors.New("the host's BMC credentials secret is not set (EmptyBMCSecretError)")
	}
	s, err := m.Kube.Dynamic.Resource(secretGVR).Namespace(MachineAPINamespace).Get(ctx, name, kube.GetOptions{})
	if err != nil {
		return "", "", fmt.Errorf("failed to read BMC credentials secret %s/%s (ResolveBMCSecretRefError): %w", MachineAPINamespace, name, err)
	}
	field := func(k string) string {
		v, _ := dig(s.Object, "data", k).(string)
		b, _ := base64.StdEncoding.DecodeString(v)
		return string(b)
	}
	user, pass := field("username"), field("password")
	if user == "" {
		return "", "", errors.New("Missing BMC connection detail 'username' in credentials")
	}
	if pass == "" {
		return "", "", errors.New("Missing BMC connection details 'password' in credentials")
	}
	return user, pass, nil
}

// secretData is host_config_data.go getSecretData: key, else "value", else NoDataInSecretError.
func (m *Metal3Standin) secretData(ctx context.Context, name, key string) ([]byte, error) {
	s, err := m.Kube.Dynamic.Resource(secretGVR).Namespace(MachineAPINamespace).Get(ctx, name, kube.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s secret %s/%s: %w", key, MachineAPINamespace, name, err)
	}
	for _, k := range []string{key, "value"} {
		if v, ok := dig(s.Object, "data", k).(string); ok {
			return base64.StdEncoding.DecodeString(v)
		}
	}
	return nil, fmt.Errorf("secret %s/%s has no %s or value key (NoDataInSecretError)", MachineAPINamespace, name, key)
}

// parseBMCAddress reads a BMO redfish address: redfish[-virtualmedia][+http|+https]://host/path,
// the path being the System (redfish.go: redfish_address from the scheme after "+" and the
// host, redfish_system_id the path). Only virtual media boots here.
func parseBMCAddress(addr string) (endpoint, system string, err error) {
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" {
		return "", "", fmt.Errorf("BMC address %q is not a URL", addr)
	}
	typ, scheme, _ := strings.Cut(u.Scheme, "+")
	if scheme == "" {
		scheme = "https"
	}
	if typ != "redfish-virtualmedia" {
		return "", "", fmt.Errorf("BMC address %q: type %q: the stand-in boots by virtual media only (redfish-virtualmedia)", addr, typ)
	}
	if u.Path == "" || u.Path == "/" {
		return "", "", fmt.Errorf("BMC address %q has no System path", addr)
	}
	return scheme + "://" + u.Host, u.Path, nil
}

// CBOTrustedCAName is the ConfigMap in openshift-machine-api whose ca-bundle.crt the
// cluster-baremetal-operator mounts in every metal3 container as
// /etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem, the bundle Ironic (sushy, through
// python-requests) verifies a BMC against (release-4.18 provisioning/baremetal_pod.go
// externalTrustBundleConfigMapName, trustedCAVolume: key ca-bundle.crt as tls-ca-bundle.pem,
// Optional; mountsWithTrustedCA: the whole /etc/pki/ca-trust/extracted/pem).
const CBOTrustedCAName = "cbo-trusted-ca"

// ironicTrust reads Ironic's CA bundle from the cluster: ConfigMap
// openshift-machine-api/cbo-trusted-ca, key ca-bundle.crt. The volume is Optional, so a
// missing ConfigMap or key mounts no bundle: Ironic trusts nothing and the TLS handshake fails,
// as here with an empty pool. The note says what the bundle held, for the error.
func (m *Metal3Standin) ironicTrust(ctx context.Context) (*x509.CertPool, string, error) {
	pool := x509.NewCertPool()
	where := MachineAPINamespace + "/" + CBOTrustedCAName
	cm, err := m.Kube.Dynamic.Resource(kube.ConfigMaps).Namespace(MachineAPINamespace).Get(ctx, CBOTrustedCAName, kube.GetOptions{})
	if kube.IsNotFound(err) {
		return pool, "ConfigMap " + where + " does not exist", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("ConfigMap %s: %w", where, err)
	}
	b, ok := dig(cm.Object, "data", TrustedCAKey).(string)
	if !ok {
		return pool, "ConfigMap " + where + " has no " + TrustedCAKey, nil
	}
	pool.AppendCertsFromPEM([]byte(b))
	return pool, fmt.Sprintf("ConfigMap %s %s, %d bytes", where, TrustedCAKey, len(b)), nil
}

// connect is connectWith m.Trust: a test's own client for the BMC, not Ironic's.
func (m *Metal3Standin) connect(endpoint, user, pass string, insecure bool) (*gofish.APIClient, error) {
	return m.connectWith(endpoint, user, pass, m.Trust, insecure)
}

// connectWith opens a Redfish session at endpoint, verifying the BMC against trust unless
// insecure.
func (m *Metal3Standin) connectWith(endpoint, user, pass string, trust *x509.CertPool, insecure bool) (*gofish.APIClient, error) {
	tr := &http.Transport{DialContext: m.Dial, TLSClientConfig: &tls.Config{RootCAs: trust, InsecureSkipVerify: insecure}}
	client := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	return gofish.Connect(gofish.ClientConfig{Endpoint: endpoint, Username: user, Password: pass, BasicAuth: true, HTTPClient: client})
}

// virtualMediaBoot is Ironic's redfish-virtualmedia boot: eject every inserted medium
// (boot.py _eject_vmedia), insert image into the first CD-capable one (_insert_vmedia:
// Inserted, WriteProtected), a one-time boot from Cd (management.py set_boot_device,
// persistent=False: BootSourceOverrideEnabled Once), then power.py reboot (On when off,
// ForceRestart when on).
func virtualMediaBoot(c *gofish.APIClient, sys *redfish.ComputerSystem, image string) error {
	vms, err := ejectAll(sys)
	if err != nil {
		return err
	}
	var cd *redfish.VirtualMedia
	for _, vm := range vms {
		if slices.Contains(vm.MediaTypes, redfish.CDMediaType) {
			cd = vm
			break
		}
	}
	if cd == nil {
		return fmt.Errorf("system %s: no virtual media device for CD (Ironic: InvalidParameterValue)", sys.ID)
	}
	if err := cd.InsertMedia(image, true, true); err != nil {
		return fmt.Errorf("insert %s: %w", image, err)
	}
	if err := sys.SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.CdBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled}); err != nil {
		return fmt.Errorf("set boot device Cd once: %w", err)
	}
	rt := redfish.OnResetType
	if sys.PowerState == redfish.OnPowerState {
		rt = redfish.ForceRestartResetType
	}
	if err := sys.Reset(rt); err != nil {
		return fmt.Errorf("reset %s: %w", rt, err)
	}
	return nil
}

// provisioningCancelled is BMO's hostStateMachine.provisioningCancelled for a host without a
// spec.customDeploy method: an image provisioning cancelled (imageProvisioningCancelled: no
// spec.image URL). The stand-in records no status.provisioning.image or customDeploy, so a
// changed method or image URL is not told apart here.
func provisioningCancelled(h *kube.Unstructured) bool {
	cd, _ := dig(h.Object, "spec", "customDeploy", "method").(string)
	img, _ := dig(h.Object, "spec", "image", "url").(string)
	return cd == "" && img == ""
}

// tearDown is Ironic's tear down of a node deployed by redfish-virtualmedia: the deploy
// interface's tear_down powers it off (ironic/drivers/modules/agent_base.py
// AgentBaseMixin.tear_down: node_power_action POWER_OFF, which redfish power.py sends as
// ComputerSystem.Reset ForceOff), then the boot interface's clean_up_instance ejects the
// virtual media (ironic/drivers/modules/redfish/boot.py RedfishVirtualMediaBoot
// clean_up_instance, _eject_all: _eject_vmedia for the CD). A node already off is not reset.
func tearDown(sys *redfish.ComputerSystem) error {
	if sys.PowerState != redfish.OffPowerState {
		if err := sys.Reset(redfish.ForceOffResetType); err != nil {
			return fmt.Errorf("reset ForceOff: %w", err)
		}
	}
	_, err := ejectAll(sys)
	return err
}

// ejectAll ejects every inserted medium of sys's managers (Ironic boot.py _eject_vmedia) and
// returns their virtual media devices, in the managers' order.
func ejectAll(sys *redfish.ComputerSystem) ([]*redfish.VirtualMedia, error) {
	managers, err := sys.ManagedBy()
	if err != nil || len(managers) == 0 {
		return nil, fmt.Errorf("system %s has no manager (%v)", sys.ID, err)
	}
	var all []*redfish.VirtualMedia
	for _, mg := range managers {
		vms, err := mg.VirtualMedia()
		if err != nil {
			return nil, fmt.Errorf("virtual media: %w", err)
		}
		for _, vm := range vms {
			if vm.Inserted {
				if err := vm.EjectMedia(); err != nil {
					return nil, fmt.Errorf("eject %s: %w", vm.ID, err)
				}
			}
		}
		all = append(all, vms...)
	}
	return all, nil
}

// setStatus writes the host's status as BMO does after a pass (the CRD's required status
// fields with it). A failure to write is logged only: the pass's own error matters more.
func (m *Metal3Standin) setStatus(ctx context.Context, host, state, errType, msg string) {
	st := map[string]any{
		"provisioning":      map[string]any{"ID": "", "state": state},
		"errorMessage":      msg,
		"hardwareProfile":   "unknown",
		"operationalStatus": map[bool]string{true: "OK", false: "error"}[msg == ""],
		"poweredOn":         state == StateProvisioned,
	}
	if errType != "" {
		st["errorType"] = errType
	}
	if _, err := kube.PatchStatus(ctx, m.Kube.Dynamic.Resource(bmhGVR).Namespace(MachineAPINamespace), "metal3.io/v1alpha1", "BareMetalHost", host, st); err != nil {
		m.logf("host %s: %v", host, err)
	}
}

// publish serves media at <MediaURL>/redfish/boot-<host>.iso (Ironic's httpd path for
// virtual-media images) and returns that URL.
func (m *Metal3Standin) publish(host string, media []byte) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.images == nil {
		m.images = map[string][]byte{}
	}
	p := "/redfish/boot-" + host + ".iso"
	m.images[p] = media
	if !m.served {
		m.served = true
		go http.Serve(m.Media, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.mu.Lock()
			b, ok := m.images[r.URL.Path]
			m.mu.Unlock()
			if !ok {
				http.NotFound(w, r)
				return
			}
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
		}))
	}
	return strings.TrimSuffix(m.MediaURL, "/") + p
}

// IronicVMediaTLSPort is Ironic's virtual-media HTTPS port (cluster-baremetal-operator
// release-4.18 provisioning/baremetal_config.go baremetalVmediaHttpsPort, the metal3-ironic
// container's VMEDIA_TLS_PORT): with Provisioning spec.disableVirtualMediaTLS false, the
// default, the image URLs Ironic gives the BMC are https://<ip>:6183/….
const IronicVMediaTLSPort = 6183

// IronicMediaTLS is the TLS configuration of Ironic's virtual-media server as the
// cluster-baremetal-operator makes it (release-4.18 provisioning/baremetal_crypto.go
// generateTlsCertificate): a CA of its own, "metal3-ironic" (library-go
// crypto.MakeSelfSignedCAConfig, two years), and a server certificate from it for the
// Provisioning's provisioningIP or, without one (provisioningNetwork Disabled, as labbuild's
// Provisioning has it), for "localhost". Nothing but Ironic knows that CA, and the certificate
// names neither the address the BMC dials nor its host name: a BMC that verified the media URL
// would refuse it, and none does (sushy-tools defaults to no verification, "to match the
// actual bare metal hardware").
func IronicMediaTLS(provisioningIP string) (*tls.Config, error) {
	const days = 365 * 2 // tlsExpirationDays
	caKey, err := pki.GenerateKey(pki.RSA2048, rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caCrt, _, err := pki.Issue(pki.Spec{CommonName: "metal3-ironic", CA: true, Validity: days * 24 * time.Hour}, caKey, nil, now)
	if err != nil {
		return nil, err
	}
	spec := pki.Spec{CommonName: "localhost", DNSNames: []string{"localhost"}, Server: true, Validity: days * 24 * time.Hour}
	if provisioningIP != "" {
		spec = pki.Spec{CommonName: provisioningIP, IPs: []string{provisioningIP}, Server: true, Validity: days * 24 * time.Hour}
	}
	key, err := pki.GenerateKey(pki.RSA2048, rand.Reader)
	if err != nil {
		return nil, err
	}
	crt, _, err := pki.Issue(spec, key, &pki.Issuer{CertPEM: caCrt, KeyPEM: caKey}, now)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(append(crt, caCrt...), key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// unpublish stops serving host's boot image (Ironic's clean_up_instance removes it from httpd).
func (m *Metal3Standin) unpublish(host string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.images, "/redfish/boot-"+host+".iso")
}

// The stand-in's boot media is the user data as coreos-installer embeds an Ignition config in a
// live ISO: a cpio archive (newc) holding config.ign. MediaFile writes it, MediaIgnition reads
// it back from the file a BMC attached.
const mediaIgnitionName = "config.ign"

// MediaFile returns the boot media holding ign.
func MediaFile(ign []byte) []byte {
	var b bytes.Buffer
	entry := func(name string, mode int, data []byte) {
		fmt.Fprintf(&b, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			1, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
		b.WriteString(name + "\x00")
		pad(&b)
		b.Write(data)
		pad(&b)
	}
	entry(mediaIgnitionName, 0o100644, ign)
	entry("TRAILER!!!", 0, nil)
	return b.Bytes()
}

func pad(b *bytes.Buffer) {
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
}

// MediaIgnition reads config.ign from the media at path (MediaFile's layout); an error names
// the file when it is not such media.
func MediaIgnition(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for off := 0; off+110 <= len(raw); {
		if string(raw[off:off+6]) != "070701" {
			return nil, fmt.Errorf("%s: no cpio (newc) header at byte %d: not the Metal3 stand-in's media", path, off)
		}
		hex := func(i int) int {
			n, _ := strconv.ParseUint(string(raw[off+6+8*i:off+14+8*i]), 16, 32)
			return int(n)
		}
		size, nameLen := hex(6), hex(11)
		nameEnd := off + 110 + nameLen
		if nameEnd > len(raw) {
			break
		}
		name := strings.TrimRight(string(raw[off+110:nameEnd]), "\x00")
		data := (nameEnd + 3) &^ 3
		if data+size > len(raw) {
			break
		}
		if name == mediaIgnitionName {
			return raw[data : data+size], nil
		}
		if name == "TRAILER!!!" {
			break
		}
		off = (data + size + 3) &^ 3
	}
	return nil, fmt.Errorf("%s: no %s on the media", path, mediaIgnitionName)
}

func dig(o map[string]any, path ...string) any {
	var cur any = o
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}
