package csr

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/url"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"

	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
)

const (
	m0 = "master-0.ocp4.example.com"
	w0 = "worker-0.ocp4.example.com"
)

var expected = map[string]NodeIdentity{
	m0: {Name: m0, Role: "master", IPs: []string{"192.168.126.101"}, DNSNames: []string{"master-0"}},
	w0: {Name: w0, Role: "worker", IPs: []string{"192.168.126.110"}},
}

var testKey = func() crypto.Signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}()

// req is the shape of one test CSR.
type req struct {
	cn, o   string
	ou      string
	dns     []string
	ips     []string
	emails  []string
	uri     string
	signer  string
	user    string
	groups  []string
	usages  []KeyUsage
	cond    string
	rawPEM  []byte // overrides the generated request
	corrupt bool   // flip a signature byte
}

var (
	clientUsages  = []KeyUsage{UsageDigitalSignature, UsageClientAuth}
	servingUsages = []KeyUsage{UsageDigitalSignature, UsageServerAuth}
	bootGroups    = []string{BootstrappersGroup, "system:authenticated"}
	nodeGroups    = []string{NodesGroup, "system:authenticated"}
)

func build(t testing.TB, r req) *CertificateSigningRequest {
	t.Helper()
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: r.cn}, DNSNames: r.dns, EmailAddresses: r.emails}
	if r.o != "" {
		tmpl.Subject.Organization = []string{r.o}
	}
	if r.ou != "" {
		tmpl.Subject.OrganizationalUnit = []string{r.ou}
	}
	for _, ip := range r.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	if r.uri != "" {
		u, _ := url.Parse(r.uri)
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if r.corrupt {
		der[len(der)-3] ^= 0xff
	}
	p := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	if r.rawPEM != nil {
		p = r.rawPEM
	}
	c := &CertificateSigningRequest{
		ObjectMeta: kube.ObjectMeta{Name: "csr-test"},
		Spec: CertificateSigningRequestSpec{
			Request: p, SignerName: r.signer, Username: r.user, Groups: r.groups, Usages: r.usages,
		},
	}
	if r.cond != "" {
		c.Status.Conditions = []CertificateSigningRequestCondition{{Type: r.cond, Status: "True"}}
	}
	return c
}

func clientReq() req {
	return req{cn: NodeUserPrefix + m0, o: NodesGroup, signer: SignerClient, user: BootstrapUser, groups: bootGroups, usages: clientUsages}
}

func servingReq() req {
	return req{cn: NodeUserPrefix + m0, o: NodesGroup, dns: []string{m0}, ips: []string{"192.168.126.101"}, signer: SignerServing, user: NodeUserPrefix + m0, groups: nodeGroups, usages: servingUsages}
}

func TestDecide(t *testing.T) {
	with := func(base req, f func(*req)) req { f(&base); return base }
	tests := []struct {
		name    string
		r       req
		approve bool
		reason  string // substring of the reason
	}{
		{"client from system:bootstrapper", clientReq(), true, "client certificate for node " + m0 + " requested by system:bootstrapper"},
		{"client for a worker", with(clientReq(), func(r *req) { r.cn = NodeUserPrefix + w0 }), true, w0},
		{"client from the node-bootstrapper SA", with(clientReq(), func(r *req) {
			r.user = NodeBootstrapperSA
			r.groups = []string{"system:serviceaccounts:openshift-machine-config-operator", "system:serviceaccounts", "system:authenticated"}
		}), true, "requested by " + NodeBootstrapperSA},
		{"client with key encipherment (RSA kubelets)", with(clientReq(), func(r *req) {
			r.usages = append(clientUsages, UsageKeyEncipherment)
		}), true, "client certificate"},
		{"SA with extra group", with(clientReq(), func(r *req) {
			r.user = NodeBootstrapperSA
			r.groups = []string{"system:serviceaccounts:openshift-machine-config-operator", "system:serviceaccounts", "system:authenticated", "system:masters"}
		}), false, "want exactly"},
		{"bootstrapper without its group", with(clientReq(), func(r *req) { r.groups = []string{"system:authenticated"} }), false, "not in group system:bootstrappers"},
		{"foreign requestor", with(clientReq(), func(r *req) { r.user = "alice"; r.groups = []string{"system:authenticated"} }), false, `requestor "alice" is not the node bootstrapper`},
		{"admin is foreign too", with(clientReq(), func(r *req) { r.user = "system:admin"; r.groups = []string{"system:masters"} }), false, "not the node bootstrapper"},
		{"client from a node (renewal is kcm's job)", with(clientReq(), func(r *req) { r.user = NodeUserPrefix + m0; r.groups = nodeGroups }), false, "not the node bootstrapper"},
		{"unknown node name", with(clientReq(), func(r *req) { r.cn = NodeUserPrefix + "intruder.example.com" }), false, `node "intruder.example.com" is not one of the lab's nodes (` + m0 + ", " + w0 + ")"},
		{"short name is not the node name", with(clientReq(), func(r *req) { r.cn = NodeUserPrefix + "master-0" }), false, "not one of the lab's nodes"},
		{"wrong organization", with(clientReq(), func(r *req) { r.o = "system:masters" }), false, "subject O="},
		{"no organization", with(clientReq(), func(r *req) { r.o = "" }), false, "subject O="},
		{"extra subject field", with(clientReq(), func(r *req) { r.ou = "x" }), false, "fields besides CN and O"},
		{"CN not a node", with(clientReq(), func(r *req) { r.cn = "system:admin" }), false, "is not system:node:<node name>"},
		{"CN empty node", with(clientReq(), func(r *req) { r.cn = NodeUserPrefix }), false, "is not system:node:<node name>"},
		{"client with SANs", with(clientReq(), func(r *req) { r.dns = []string{m0} }), false, "no SANs"},
		{"client with server auth", with(clientReq(), func(r *req) {
			r.usages = append(clientUsages, UsageServerAuth)
		}), false, `usage "server auth" is not allowed`},
		{"client lacking client auth", with(clientReq(), func(r *req) {
			r.usages = []KeyUsage{UsageDigitalSignature}
		}), false, `lack "client auth"`},

		{"serving from the node", servingReq(), true, "serving certificate for node " + m0},
		{"serving with the short alias", with(servingReq(), func(r *req) { r.dns = []string{m0, "master-0"} }), true, "serving"},
		{"serving with IP only", with(servingReq(), func(r *req) { r.dns = nil }), true, "serving"},
		{"serving for another node", with(servingReq(), func(r *req) { r.user = NodeUserPrefix + w0 }), false, "asks for a certificate of another node"},
		{"serving from the bootstrapper", with(servingReq(), func(r *req) { r.user = BootstrapUser; r.groups = bootGroups }), false, "is not a node"},
		{"serving from a node user outside system:nodes", with(servingReq(), func(r *req) { r.groups = []string{"system:authenticated"} }), false, "is not a node"},
		{"serving for an unknown node", with(servingReq(), func(r *req) {
			r.cn = NodeUserPrefix + "x.example.com"
			r.user = NodeUserPrefix + "x.example.com"
		}), false, "not one of the lab's nodes"},
		{"serving with a foreign IP", with(servingReq(), func(r *req) { r.ips = []string{"192.168.126.101", "10.0.0.1"} }), false, "IP SAN 10.0.0.1 is not node"},
		{"serving with another node's IP", with(servingReq(), func(r *req) { r.ips = []string{"192.168.126.110"} }), false, "IP SAN 192.168.126.110"},
		{"serving with a foreign DNS name", with(servingReq(), func(r *req) { r.dns = []string{m0, "api.ocp4.example.com"} }), false, `DNS SAN "api.ocp4.example.com"`},
		{"serving with an e-mail SAN", with(servingReq(), func(r *req) { r.emails = []string{"a@b.c"} }), false, "no e-mail or URI"},
		{"serving with a URI SAN", with(servingReq(), func(r *req) { r.uri = "spiffe://x" }), false, "no e-mail or URI"},
		{"serving without SANs", with(servingReq(), func(r *req) { r.dns, r.ips = nil, nil }), false, "must name the node"},
		{"serving with client auth", with(servingReq(), func(r *req) {
			r.usages = append(servingUsages, UsageClientAuth)
		}), false, `usage "client auth" is not allowed`},

		{"other signer", with(clientReq(), func(r *req) { r.signer = "kubernetes.io/kube-apiserver-client" }), false, "not a kubelet signer"},
		{"legacy signer", with(clientReq(), func(r *req) { r.signer = "kubernetes.io/legacy-unknown" }), false, "not a kubelet signer"},
		{"already approved", with(clientReq(), func(r *req) { r.cond = CertificateApproved }), false, "already approved"},
		{"already denied", with(clientReq(), func(r *req) { r.cond = CertificateDenied }), false, "already denied"},
		{"not PEM", with(clientReq(), func(r *req) { r.rawPEM = []byte("hello") }), false, "not a PEM CERTIFICATE REQUEST"},
		{"wrong PEM type", with(clientReq(), func(r *req) {
			r.rawPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}})
		}), false, "not a PEM CERTIFICATE REQUEST"},
		{"bad signature", with(clientReq(), func(r *req) { r.corrupt = true }), false, "spec.request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := Decide(build(t, tc.r), expected, nil)
			if ok != tc.approve || !strings.Contains(why, tc.reason) {
				t.Errorf("Decide = %v, %q; want %v with %q", ok, why, tc.approve, tc.reason)
			}
		})
	}
}

// TestApproveFake: Approve approves the expected CSR through the approval subresource with
// labbuild's reason, leaves the refused one pending (not denied) and skips decided ones.
func TestApproveFake(t *testing.T) {
	good := build(t, clientReq())
	good.Name = "csr-good"
	bad := build(t, with(clientReq(), func(r *req) { r.user = "alice" }))
	bad.Name = "csr-foreign"
	done := build(t, with(clientReq(), func(r *req) { r.cond = CertificateApproved }))
	done.Name = "csr-done"
	fake := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests"}: "CertificateSigningRequestList"},
		toU(t, good), toU(t, bad), toU(t, done))
	cs := kubedyn.Wrap(fake)
	ds, err := Approve(context.Background(), cs, expected)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].CSR != "csr-foreign" || ds[0].Approve || ds[1].CSR != "csr-good" || !ds[1].Approved || ds[1].Node != m0 {
		t.Fatalf("decisions = %+v", ds)
	}
	get := func(name string) *CertificateSigningRequest {
		got, err := kube.Get[CertificateSigningRequest](context.Background(), cs, kube.CSRs, "", name)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := get("csr-good")
	if Pending(got) || got.Status.Conditions[0].Reason != ApprovalReason || got.Status.Conditions[0].Status != "True" {
		t.Errorf("csr-good conditions = %+v", got.Status.Conditions)
	}
	got = get("csr-foreign")
	if !Pending(got) {
		t.Errorf("csr-foreign was decided: %+v", got.Status.Conditions)
	}
	var approvals int
	for _, a := range fake.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "approval" {
			approvals++
		}
	}
	if approvals != 1 {
		t.Errorf("%d approval updates, want 1", approvals)
	}
}

func with(base req, f func(*req)) req { f(&base); return base }

// toU is c as the fake dynamic client holds it.
func toU(t testing.TB, c *CertificateSigningRequest) *unstructured.Unstructured {
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(append(b[:len(b)-1], []byte(`,"apiVersion":"certificates.k8s.io/v1","kind":"CertificateSigningRequest"}`)...)); err != nil {
		t.Fatal(err)
	}
	return u
}
