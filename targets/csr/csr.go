// Package csr approves the certificate signing requests of the lab's nodes, and only those.
//
// A node joins in two waves (spec stage 11): first its kubelet, holding only the bootstrap
// identity, asks for a client certificate (signer kubernetes.io/kube-apiserver-client-kubelet);
// once that is issued and the kubelet runs as system:node:<name>, it asks for a serving
// certificate (signer kubernetes.io/kubelet-serving, because the MCO's kubelet config sets
// serverTLSBootstrap: true). openshift-the-hard-way approves every pending CSR by hand
// (`oc get csr -o name | xargs oc adm certificate approve`); no machine-approver runs at that
// point. This package decides like OpenShift's cluster-machine-approver and kube-controller-
// manager's csrapproving controller do, narrowed to the node names the lab config declares:
//
//   - client CSRs: requestor is the MCO node-bootstrapper service account
//     (system:serviceaccount:openshift-machine-config-operator:node-bootstrapper, the
//     identity in a kubeconfig minted from that SA's token) or the user system:bootstrapper in
//     group system:bootstrappers (openshift-the-hard-way's kubelet-bootstrap certificate,
//     spec §5.3); subject exactly CN=system:node:<name>, O=system:nodes; no SANs; usages
//     client auth + digital signature (+ key encipherment, which RSA kubelets still ask for).
//     These are the checks of k8s.io/kubernetes pkg/apis/certificates ValidateKubeletClientCSR.
//   - serving CSRs: requestor is the node itself (system:node:<name> in group system:nodes)
//     and the subject says the same; usages server auth + digital signature (+ key
//     encipherment); every DNS SAN is the node's name (or an alias the config gives) and every
//     IP SAN is one of the node's addresses; no e-mail or URI SANs.
//
// Everything else is refused and left pending (not denied): a foreign CSR may belong to someone
// else's approver, and a denial cannot be undone.
package csr

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/labbuild/labbuild/targets/kube"
)

// Identities of the requestors and subjects involved, as Kubernetes and OpenShift name them.
const (
	// NodeBootstrapperSA is the MCO's node-bootstrapper service account user name
	// (openshift/machine-config-operator manifests/machineconfigserver/node-bootstrapper-sa.yaml;
	// cluster-machine-approver's nodeBootstrapperUsername).
	NodeBootstrapperSA = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"
	// BootstrapUser is the CN of openshift-the-hard-way's kubelet-bootstrap client certificate.
	BootstrapUser = "system:bootstrapper"
	// BootstrappersGroup is the O of that certificate; Kubernetes bootstrap tokens use it too.
	BootstrappersGroup = "system:bootstrappers"
	// NodeUserPrefix + node name is a kubelet's user name; NodesGroup is its group
	// (k8s.io/apiserver pkg/authentication/user and the Node authorizer).
	NodeUserPrefix = "system:node:"
	NodesGroup     = "system:nodes"

	// The two signers a kubelet uses (k8s.io/api/certificates/v1 KubeAPIServerClientKubeletSignerName,
	// KubeletServingSignerName).
	SignerClient  = "kubernetes.io/kube-apiserver-client-kubelet"
	SignerServing = "kubernetes.io/kubelet-serving"

	// ApprovalReason is the reason on the Approved condition labbuild adds, so `oc get csr -o
	// yaml` shows who approved.
	ApprovalReason = "LabbuildNodeApprover"
)

// nodeBootstrapperSAGroups are the groups a service-account token for the node-bootstrapper
// carries; cluster-machine-approver requires exactly these.
var nodeBootstrapperSAGroups = []string{
	"system:authenticated",
	"system:serviceaccounts",
	"system:serviceaccounts:openshift-machine-config-operator",
}

// CertificateSigningRequest is a certificates.k8s.io/v1 CertificateSigningRequest: the
// fields the approver reads, with k8s.io/api's JSON shape and field names. List keeps the
// object as the server sent it too, so an approval sends every field back unchanged (labels,
// extra, expirationSeconds) and adds only its condition.
type CertificateSigningRequest struct {
	kube.ObjectMeta `json:"metadata"`
	Spec            CertificateSigningRequestSpec   `json:"spec"`
	Status          CertificateSigningRequestStatus `json:"status"`

	raw map[string]any
}

// CertificateSigningRequestSpec is a CSR's spec.
type CertificateSigningRequestSpec struct {
	// Request is the PEM CERTIFICATE REQUEST.
	Request    []byte     `json:"request"`
	SignerName string     `json:"signerName"`
	Usages     []KeyUsage `json:"usages,omitempty"`
	// Username and Groups are the requestor, filled in by the API server.
	Username string   `json:"username,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// CertificateSigningRequestStatus is a CSR's status: conditions and, once signed, the
// certificate.
type CertificateSigningRequestStatus struct {
	Conditions  []CertificateSigningRequestCondition `json:"conditions,omitempty"`
	Certificate []byte                               `json:"certificate,omitempty"`
}

// CertificateSigningRequestCondition is one condition (Approved, Denied, Failed).
type CertificateSigningRequestCondition struct {
	Type           string `json:"type"`
	Status         string `json:"status"`
	Reason         string `json:"reason,omitempty"`
	Message        string `json:"message,omitempty"`
	LastUpdateTime string `json:"lastUpdateTime,omitempty"`
}

// KeyUsage is a requested usage ("digital signature", "client auth").
type KeyUsage string

// The usages and condition types of certificates/v1.
const (
	UsageDigitalSignature KeyUsage = "digital signature"
	UsageKeyEncipherment  KeyUsage = "key encipherment"
	UsageClientAuth       KeyUsage = "client auth"
	UsageServerAuth       KeyUsage = "server auth"

	CertificateApproved = "Approved"
	CertificateDenied   = "Denied"
	CertificateFailed   = "Failed"
)

// NodeIdentity is what the lab config says a node is: its Kubernetes node name (the kubelet
// uses the host name, which labbuild's Ignition sets to the FQDN <node>.<cluster domain>), the
// addresses its serving certificate may name, and extra DNS names it may claim (the short
// name). Role ("master", "worker") is informational.
type NodeIdentity struct {
	Name     string
	Role     string
	IPs      []string
	DNSNames []string
	// ByMachine marks a node that a Machine provisions (platform baremetal's workers, which
	// Metal3 boots from the MCO's pointer config): its CSRs are decided as OpenShift's
	// cluster-machine-approver decides them, by the Machine (decideMachineClient,
	// decideMachineServing), not by IPs and DNSNames. Its Name is the DHCP short name the
	// node registers under: the pointer config writes no /etc/hostname.
	ByMachine bool
}

// Decision is the verdict on one CSR.
type Decision struct {
	CSR      string // object name (csr-xxxxx)
	Signer   string
	Node     string // node name the CSR is for ("" when not a node CSR)
	Approve  bool
	Approved bool   // true when Approve ran and the API accepted the approval
	Reason   string // why it is approved or refused
}

// Decide says whether csr is one of the lab's expected node CSRs, with the reason either way.
// expected maps node name → identity. It looks at the object: requestor (spec.username,
// spec.groups), signer, usages and the PEM request (subject, SANs, signature), and for a node
// ByMachine at what the machine approver reads besides (m: the Machines and Nodes; nil refuses
// such a CSR). A CSR that is already approved, denied or failed is refused ("already ...").
func Decide(csr *CertificateSigningRequest, expected map[string]NodeIdentity, m *MachineView) (approve bool, reason string) {
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case CertificateApproved, CertificateDenied, CertificateFailed:
			if c.Status != "False" {
				return false, "already " + strings.ToLower(c.Type)
			}
		}
	}
	req, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return false, err.Error()
	}
	switch csr.Spec.SignerName {
	case SignerClient:
		if id, ok := expected[strings.TrimPrefix(req.Subject.CommonName, NodeUserPrefix)]; ok && id.ByMachine {
			return decideMachineClient(csr, req, id, m)
		}
		return decideClient(csr, req, expected)
	case SignerServing:
		if id, ok := expected[strings.TrimPrefix(req.Subject.CommonName, NodeUserPrefix)]; ok && id.ByMachine {
			return decideMachineServing(csr, req, id, m)
		}
		return decideServing(csr, req, expected)
	default:
		return false, fmt.Sprintf("signer %q is not a kubelet signer (%s, %s)", csr.Spec.SignerName, SignerClient, SignerServing)
	}
}

func parseRequest(b []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("spec.request is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("spec.request: %v", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("spec.request signature: %v", err)
	}
	return req, nil
}

// nodeFromSubject checks the subject is exactly CN=system:node:<name>, O=system:nodes and
// returns the name.
func nodeFromSubject(req *x509.CertificateRequest) (string, string) {
	s := req.Subject
	if !slices.Equal(s.Organization, []string{NodesGroup}) {
		return "", fmt.Sprintf("subject O=%q, want exactly [%s]", s.Organization, NodesGroup)
	}
	if !strings.HasPrefix(s.CommonName, NodeUserPrefix) || len(s.CommonName) == len(NodeUserPrefix) {
		return "", fmt.Sprintf("subject CN %q is not %s<node name>", s.CommonName, NodeUserPrefix)
	}
	if len(s.Country)+len(s.Locality)+len(s.Province)+len(s.StreetAddress)+len(s.PostalCode)+len(s.OrganizationalUnit) > 0 || s.SerialNumber != "" {
		return "", "subject has fields besides CN and O"
	}
	return strings.TrimPrefix(s.CommonName, NodeUserPrefix), ""
}

// checkUsages requires want and allows only want plus key encipherment.
func checkUsages(got []KeyUsage, want ...KeyUsage) string {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return fmt.Sprintf("usages %v lack %q", got, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) && g != UsageKeyEncipherment {
			return fmt.Sprintf("usage %q is not allowed (want %v, optionally %q)", g, want, UsageKeyEncipherment)
		}
	}
	return ""
}

func decideClient(csr *CertificateSigningRequest, req *x509.CertificateRequest, expected map[string]NodeIdentity) (bool, string) {
	user, groups := csr.Spec.Username, csr.Spec.Groups
	switch {
	case user == NodeBootstrapperSA:
		want := slices.Clone(nodeBootstrapperSAGroups)
		got := slices.Clone(groups)
		sort.Strings(got)
		if !slices.Equal(slices.Compact(got), want) {
			return false, fmt.Sprintf("requestor %s has groups %v, want exactly %v", user, groups, want)
		}
	case user == BootstrapUser:
		if !slices.Contains(groups, BootstrappersGroup) {
			return false, fmt.Sprintf("requestor %s is not in group %s (the kubelet-bootstrap certificate needs O=%s)", user, BootstrappersGroup, BootstrappersGroup)
		}
	default:
		return false, fmt.Sprintf("requestor %q is not the node bootstrapper (%s or %s in %s)", user, NodeBootstrapperSA, BootstrapUser, BootstrappersGroup)
	}
	name, why := nodeFromSubject(req)
	if why != "" {
		return false, why
	}
	if _, ok := expected[name]; !ok {
		return false, fmt.Sprintf("node %q is not one of the lab's nodes (%s)", name, names(expected))
	}
	if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
		return false, "a kubelet client certificate request must carry no SANs"
	}
	if why := checkUsages(csr.Spec.Usages, UsageDigitalSignature, UsageClientAuth); why != "" {
		return false, why
	}
	return true, fmt.Sprintf("client certificate for node %s requested by %s", name, user)
}

func decideServing(csr *CertificateSigningRequest, req *x509.CertificateRequest, expected map[string]NodeIdentity) (bool, string) {
	user := csr.Spec.Username
	if !strings.HasPrefix(user, NodeUserPrefix) || !slices.Contains(csr.Spec.Groups, NodesGroup) {
		return false, fmt.Sprintf("requestor %q is not a node (%s<name> in group %s)", user, NodeUserPrefix, NodesGroup)
	}
	name, why := nodeFromSubject(req)
	if why != "" {
		return false, why
	}
	if user != NodeUserPrefix+name {
		return false, fmt.Sprintf("requestor %q asks for a certificate of another node, %q", user, name)
	}
	id, ok := expected[name]
	if !ok {
		return false, fmt.Sprintf("node %q is not one of the lab's nodes (%s)", name, names(expected))
	}
	if len(req.EmailAddresses)+len(req.URIs) > 0 {
		return false, "a kubelet serving certificate request must carry no e-mail or URI SANs"
	}
	if len(req.DNSNames)+len(req.IPAddresses) == 0 {
		return false, "a kubelet serving certificate request must name the node (DNS or IP SAN)"
	}
	for _, d := range req.DNSNames {
		if !strings.EqualFold(d, id.Name) && !slices.ContainsFunc(id.DNSNames, func(a string) bool { return strings.EqualFold(a, d) }) {
			return false, fmt.Sprintf("DNS SAN %q is not node %s's name", d, name)
		}
	}
	for _, ip := range req.IPAddresses {
		if !slices.ContainsFunc(id.IPs, func(s string) bool { p := net.ParseIP(s); return p != nil && p.Equal(ip) }) {
			return false, fmt.Sprintf("IP SAN %s is not node %s's address (%s)", ip, name, strings.Join(id.IPs, ", "))
		}
	}
	if why := checkUsages(csr.Spec.Usages, UsageDigitalSignature, UsageServerAuth); why != "" {
		return false, why
	}
	return true, fmt.Sprintf("serving certificate for node %s requested by the node", name)
}

func names(m map[string]NodeIdentity) string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none expected"
	}
	return strings.Join(out, ", ")
}

// Pending reports whether csr has no Approved, Denied or Failed condition: the state `oc get
// csr` shows as Pending and approve-csrs.sh looks for (status.conditions empty).
func Pending(csr *CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case CertificateApproved, CertificateDenied, CertificateFailed:
			return false
		}
	}
	return true
}

// NodeOf returns the node name a kubelet CSR is for (from its subject CN), or "".
func NodeOf(csr *CertificateSigningRequest) string {
	req, err := parseRequest(csr.Spec.Request)
	if err != nil || !strings.HasPrefix(req.Subject.CommonName, NodeUserPrefix) {
		return ""
	}
	return strings.TrimPrefix(req.Subject.CommonName, NodeUserPrefix)
}

// List returns every CSR (`oc get csr`), decoded from the dynamic client's objects.
func List(ctx context.Context, dyn kube.Interface) ([]CertificateSigningRequest, error) {
	l, err := dyn.Resource(kube.CSRs).List(ctx, kube.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list CSRs: %w", err)
	}
	out := make([]CertificateSigningRequest, len(l.Items))
	for i := range l.Items {
		b, err := l.Items[i].MarshalJSON()
		if err == nil {
			err = json.Unmarshal(b, &out[i])
		}
		if err != nil {
			return nil, fmt.Errorf("list CSRs: %s: %w", l.Items[i].GetName(), err)
		}
		out[i].raw = l.Items[i].Object
	}
	return out, nil
}

// Approve lists the CSRs, decides on every pending one, and approves those Decide accepts
// through the approval subresource (what `oc adm certificate approve` does: an Approved=True
// condition with reason ApprovalReason, PUT to certificatesigningrequests/<name>/approval). It
// returns one Decision per pending CSR, sorted by name; refused CSRs are left pending. An
// approval that loses a race (the CSR changed or was approved meanwhile) is not an error: the
// next pass sees the new state. Errors name the failing API call; the caller retries them.
func Approve(ctx context.Context, dyn kube.Interface, expected map[string]NodeIdentity) ([]Decision, error) {
	list, err := List(ctx, dyn)
	if err != nil {
		return nil, err
	}
	m, err := ReadMachines(ctx, dyn, expected)
	if err != nil {
		return nil, err
	}
	var out []Decision
	for i := range list {
		c := &list[i]
		if !Pending(c) {
			continue
		}
		ok, why := Decide(c, expected, m)
		d := Decision{CSR: c.Name, Signer: c.Spec.SignerName, Node: NodeOf(c), Approve: ok, Reason: why}
		if ok {
			err := approve(ctx, dyn, c, "labbuild: "+why)
			switch {
			case err == nil:
				d.Approved = true
			case kube.IsConflict(err) || kube.IsNotFound(err):
				// Changed or gone meanwhile: decide again on the next pass.
			default:
				return out, fmt.Errorf("approve CSR %s (node %s): %w", c.Name, d.Node, err)
			}
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CSR < out[j].CSR })
	return out, nil
}

// approve adds the Approved=True condition to c and updates the approval subresource; the
// object's resourceVersion makes a concurrent change a conflict. The body is the object as
// listed (c.raw, so fields labbuild does not model survive) plus the condition.
func approve(ctx context.Context, dyn kube.Interface, c *CertificateSigningRequest, msg string) error {
	cond := CertificateSigningRequestCondition{
		Type:    CertificateApproved,
		Status:  "True",
		Reason:  ApprovalReason,
		Message: msg,
		// meta/v1 Time: RFC 3339, seconds, UTC.
		LastUpdateTime: time.Now().UTC().Format(time.RFC3339),
	}
	if c.raw == nil {
		return fmt.Errorf("CSR %s was not listed: approve only what List returned", c.Name)
	}
	// A deep copy through JSON: the listed object stays as it was.
	b, err := json.Marshal(c.raw)
	if err != nil {
		return err
	}
	u := &kube.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return err
	}
	status, _ := u.Object["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		u.Object["status"] = status
	}
	conds, _ := status["conditions"].([]any)
	status["conditions"] = append(conds, map[string]any{"type": cond.Type, "status": cond.Status, "reason": cond.Reason,
		"message": cond.Message, "lastUpdateTime": cond.LastUpdateTime})
	u.SetAPIVersion(kube.CSRs.GroupVersion().String())
	u.SetKind("CertificateSigningRequest")
	_, err = dyn.Resource(kube.CSRs).Update(ctx, u, kube.UpdateOptions{}, "approval")
	return err
}
