package targets

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/pki"
	"github.com/labbuild/labbuild/targets/csr"
)

// The pki family: keys, CAs and leaf certificates (openshift-the-hard-way stage 05,
// ../shared/spec/stages.md §5, with its fixes; target-graph.md §3.3).
//
// Output conventions other families rely on: pki/key/<id> writes tls.key (0600, PEM);
// pki/ca/<id> and pki/cert/<id> write tls.crt, and their key is pki/key/<id>; pki/sa writes
// sa.pub (its key is pki/key/service-account).
//
// Differences from openshift-the-hard-way, on purpose:
//   - Every CA is self-signed, as openshift-install's signers are. OTHW signs etcd-ca,
//     kubernetes-ca and front-proxy-ca with a root and then trusts each intermediate alone,
//     which works in Go but not in openssl without -partial_chain.
//   - The etcd CA is etcd-signer (with etcd-metric-signer beside it), the names the
//     cluster-etcd-operator reads from openshift-config, so the operator trusts the CA the
//     bootstrap etcd was started with instead of minting its own.
//   - front-proxy-client's CN is system:openshift-aggregator, which the kube-apiserver's
//     --requestheader-allowed-names accepts; OTHW's "front-proxy-client" is refused.
//   - kubelet-bootstrap is the installer's node bootstrap credential (issue 38 #10): the MCO
//     node-bootstrapper service account's identity as a client certificate, living pki.caDays
//     (ten years by default, the installer's ValidityTenYears) from its own signer, so a node
//     added on day 2 still joins and the cluster's machine approver accepts its CSRs.
//   - The unused kubelet-ca and the etcd-peer-master-N certs (the cluster-etcd-operator issues
//     those) are not made.

// pkiCA describes one signer.
type pkiCA struct {
	id, cn, doc string
}

// pkiCAs are the lab's signers; each is self-signed with OU openshift (pkg/asset/tls
// SelfSignedCertificate requires CN and OU).
var pkiCAs = []pkiCA{
	{"root", "root-ca", "root CA: the machine-config server's CA and MCO --root-ca"},
	{"kubernetes", "kubernetes-ca", "Kubernetes CA: client CA, kubelet CSR signer, kubeconfig CA, MCO --kube-ca"},
	{"front-proxy", "front-proxy-ca", "front-proxy CA: the kube-apiserver's --requestheader-client-ca-file"},
	{"etcd-signer", "etcd-signer", "etcd CA (openshift-config/etcd-signer): bootstrap etcd's trusted CA"},
	{"etcd-metric-signer", "etcd-metric-signer", "etcd metrics CA (openshift-config/etcd-metric-signer)"},
	// The kube-apiserver-operator's three serving signers, handed over as its Secrets
	// loadbalancer-serving-signer, localhost-serving-signer and service-network-serving-signer
	// (docs/past-the-pivot.md): after the pivot it serves api/api-int, localhost and the
	// service IP with certificates from these, which every kubeconfig's CA bundle trusts.
	{"lb-signer", "kube-apiserver-lb-signer", "kube-apiserver load-balancer serving signer (operator Secret loadbalancer-serving-signer): api, api-int after the pivot"},
	{"localhost-signer", "kube-apiserver-localhost-signer", "kube-apiserver localhost serving signer (operator Secret localhost-serving-signer)"},
	{"service-network-signer", "kube-apiserver-service-network-signer", "kube-apiserver service-network serving signer (operator Secret service-network-serving-signer)"},
	// The kubelet signer (installer pkg/asset/tls/kubelet.go KubeletCSRSignerCertKey, CN
	// kubelet-signer): the bootstrap kube-controller-manager signs kubelet client and serving
	// certificates with it, and it is handed over as the kube-controller-manager-operator's
	// csr-signer-signer and in openshift-config-managed/csr-controller-ca, which the post-pivot
	// kube-apiserver trusts for kubelet clients and kubelet serving certificates (issue 24).
	// The installer's lives one day (the operator rotates its CSR signer anyway); labbuild's
	// lives pki.caDays like its other CAs, so a bootstrap rebuilt later still signs.
	{"kubelet-signer", "kubelet-signer", "kubelet CSR signer: the bootstrap kube-controller-manager's --cluster-signing-*; handed over as csr-signer-signer and csr-controller-ca"},
	// The kube-apiserver-operator's kubelet-client signer (installer pkg/asset/tls/apiserver.go
	// KubeAPIServerToKubeletSignerCertKey, CN kube-apiserver-to-kubelet-signer), handed over as
	// its Secret kube-apiserver-to-kubelet-signer: cluster-kube-apiserver-operator
	// pkg/operator/certrotationcontroller/certrotationcontroller.go NewCertRotationController
	// mints the post-pivot kube-apiserver's kubelet-client certificate from it. The kubelets
	// trust it from their first boot (pki/bundle/kubelet-client-ca, the MCO render's kube-ca),
	// as the installer's kube-apiserver-complete-client-ca-bundle holds it. The bootstrap's own
	// kubelet client certificate stays with the kubernetes CA, so existing labs keep it.
	{"kube-apiserver-to-kubelet-signer", "kube-apiserver-to-kubelet-signer", "kube-apiserver-to-kubelet client signer (operator Secret kube-apiserver-to-kubelet-signer): the post-pivot kube-apiserver's kubelet-client"},
	// The signer of the nodes' bootstrap credential (installer pkg/asset/tls/kubelet.go
	// KubeletBootstrapCertSigner, CN kubelet-bootstrap-kubeconfig-signer, ValidityTenYears):
	// in the kube-apiserver's client CA bundle before the pivot (pki/bundle/
	// kube-apiserver-client-ca) and after it (openshift-config-managed/kubelet-bootstrap-kubeconfig,
	// manifests/cluster/client-cas). Issue 38 #10.
	{"kubelet-bootstrap-signer", "kubelet-bootstrap-kubeconfig-signer", "kubelet bootstrap signer (openshift-config-managed/kubelet-bootstrap-kubeconfig): signs the nodes' node-bootstrapper client cert"},
}

// pkiBundle is a CA bundle file: the certificates of CAs, in order, as one PEM file.
type pkiBundle struct {
	id, doc string
	// cas are pki/ca ids, or a pki/cert target by its whole name (an intermediate CA).
	cas []string
}

// pkiBundles are the bundles a static pod flag names (pki/bundle/<id> writes ca-bundle.crt).
var pkiBundles = []pkiBundle{
	// The bootstrap kube-apiserver's --client-ca-file: the kubernetes CA (admin, kubelet
	// bootstrap, control-plane clients) and the kubelet signer (kubelet client certificates),
	// as the installer's kube-apiserver-complete-client-ca-bundle holds both.
	// And the kubelet bootstrap signer (the nodes' bootstrap credential), as the installer's
	// bundle holds KubeletBootstrapCertSigner.
	// And the kube-controller-manager-operator's csr-signer (pki/cert/csr-signer), which the
	// installer's bundle lacks: a kubelet whose client certificate a master's
	// kube-controller-manager signed before the pivot is then not refused.
	{"kube-apiserver-client-ca", "bootstrap kube-apiserver --client-ca-file: kubernetes CA + kubelet signer + kubelet bootstrap signer + csr-signer", []string{"kubernetes", "kubelet-signer", "kubelet-bootstrap-signer", "pki/cert/csr-signer"}},
	// The bootstrap kube-apiserver's --kubelet-certificate-authority: the kubelet signer, as the
	// installer's kubelet-client-ca-bundle.crt (pkg/asset/tls/kubelet.go KubeletClientCABundle;
	// cluster-kube-apiserver-operator bindata/bootkube/config/bootstrap-config-overrides.yaml
	// kubelet-certificate-authority), and the csr-signer, so logs and exec reach a kubelet whose
	// serving certificate a master's kube-controller-manager signed before the pivot.
	{"kubelet-serving-ca", "bootstrap kube-apiserver --kubelet-certificate-authority: kubelet signer + csr-signer", []string{"kubelet-signer", "pki/cert/csr-signer"}},
	// The kubelets' client CA (kubelet-ca.crt, through the MCO render's --kube-ca): the
	// kubernetes CA, which signs the bootstrap kube-apiserver's kubelet client certificate, and
	// the handed-over kube-apiserver-to-kubelet signer, which signs the post-pivot one. After the
	// pivot machine-config-operator pkg/operator/sync.go syncRenderConfig builds the same set
	// from initial-kube-apiserver-server-ca and kube-apiserver-to-kubelet-client-ca.
	{"kubelet-client-ca", "kubelets' client CA (MCO --kube-ca, kubelet-ca.crt): kubernetes CA + kube-apiserver-to-kubelet signer", []string{"kubernetes", "kube-apiserver-to-kubelet-signer"}},
	// The bootstrap kube-controller-manager's --root-ca-file, the CA every kube-root-ca.crt
	// ConfigMap and service-account token's ca.crt gets: the installer's
	// kube-apiserver-complete-server-ca-bundle (the three serving signers the masters'
	// kube-apiserver serves from after the pivot; cluster-kube-controller-manager-operator
	// bindata/bootkube/config/bootstrap-config-overrides.yaml root-ca-file) plus the kubernetes
	// CA, which signs the bootstrap kube-apiserver's serving certificate. An in-cluster client
	// loads it once at start (client-go rest.InClusterConfig), so a pod started before the
	// pivot must already trust the masters' serving certificates (issue 38 #2).
	{"kube-apiserver-server-ca", "bootstrap kube-controller-manager --root-ca-file: kubernetes CA + the three kube-apiserver serving signers",
		append([]string{"kubernetes"}, pkiServingSigners...)},
}

// pkiMirrorCA signs the release mirror's serving certificate (mirror/registry): the cluster
// trusts it through additionalTrustBundle.
var pkiMirrorCA = pkiCA{"mirror-ca", "labbuild-mirror-ca", "the release mirror's CA (sticky key): the cluster trusts it through additionalTrustBundle"}

// pkiBMCCA is platform baremetal's signer of the virtual BMC's serving certificate (bmc/service):
// its own CA, so that trusting the BMC (install-config hosts[].bmc, a BareMetalHost's Ironic)
// trusts nothing of the cluster's.
var pkiBMCCA = pkiCA{"bmc", "labbuild-bmc-ca", "virtual BMC CA (platform baremetal): signs the Redfish BMC's serving cert"}

// pkiCAsOf returns the lab's signers: pkiCAs, pkiMirrorCA when the lab has a mirror, and
// pkiBMCCA on platform baremetal. A lab with neither has exactly pkiCAs.
func pkiCAsOf(c *lab.Config) []pkiCA {
	cas := pkiCAs[:len(pkiCAs):len(pkiCAs)]
	if c != nil && c.MirrorOn() {
		cas = append(cas, pkiMirrorCA)
	}
	if c != nil && c.Baremetal() {
		cas = append(cas, pkiBMCCA)
	}
	return cas
}

// pkiLeaf describes one leaf certificate. spec reads what it needs through the Step, so the
// values are declared and hashed; reads lists those config paths.
type pkiLeaf struct {
	id, issuer, doc string
	short           bool // validity from pki.bootstrapHours instead of pki.certDays
	caLife          bool // validity from pki.caDays (its signer's), instead of pki.certDays
	reads           func(c *lab.Config) []string
	spec            func(s *engine.Step) (pki.Spec, error)
}

// pkiLeaves returns the leaf certificates for c. Node names are identities captured by the
// closures; every value comes through the Step.
func pkiLeaves(c *lab.Config) []pkiLeaf {
	// The bootstrap control plane's host: the bootstrap node, or a single node's master, which
	// runs it in place (serving the same etcd and kube-apiserver names on the same address).
	boot := c.BootstrapHost().Name
	bootAndMasters := []string{boot}
	for _, m := range c.NodesByRole(lab.RoleMaster) {
		if m.Name != boot {
			bootAndMasters = append(bootAndMasters, m.Name)
		}
	}
	nodeIPs := func(names ...string) []string {
		var r []string
		for _, n := range names {
			r = append(r, lab.NodePath(n, lab.NodeIP))
		}
		return r
	}
	domainReads := []string{lab.ClusterName, lab.ClusterBaseDomain}
	client := func(cn string, o ...string) func(*engine.Step) (pki.Spec, error) {
		return func(*engine.Step) (pki.Spec, error) {
			return pki.Spec{CommonName: cn, Organization: o, Client: true}, nil
		}
	}
	none := func(*lab.Config) []string { return nil }
	leaves := []pkiLeaf{
		{
			id: "etcd-server", issuer: "etcd-signer",
			doc: "bootstrap etcd serving cert (server+client: etcd and its probes present it as a client)",
			reads: func(*lab.Config) []string {
				return append(domainReads[:2:2], nodeIPs(bootAndMasters...)...)
			},
			spec: func(s *engine.Step) (pki.Spec, error) {
				dom, err := clusterDomain(s)
				if err != nil {
					return pki.Spec{}, err
				}
				ips, err := pkiNodeIPs(s, bootAndMasters)
				if err != nil {
					return pki.Spec{}, err
				}
				return pki.Spec{CommonName: "etcd-server", Server: true, Client: true,
					DNSNames: []string{"localhost", "etcd." + dom},
					IPs:      append(ips, "127.0.0.1")}, nil
			},
		},
		{
			id: "etcd-peer", issuer: "etcd-signer",
			doc: "bootstrap etcd peer cert (server+client), named for the bootstrap node",
			reads: func(*lab.Config) []string {
				return append(append(domainReads[:2:2], lab.NodePath(boot, lab.NodeName)), nodeIPs(boot)...)
			},
			spec: func(s *engine.Step) (pki.Spec, error) {
				dom, err := clusterDomain(s)
				if err != nil {
					return pki.Spec{}, err
				}
				name, err := s.String(lab.NodePath(boot, lab.NodeName))
				if err != nil {
					return pki.Spec{}, err
				}
				ips, err := pkiNodeIPs(s, []string{boot})
				if err != nil {
					return pki.Spec{}, err
				}
				return pki.Spec{CommonName: "system:etcd-peer:" + name, Organization: []string{"system:etcd-peers"},
					Server: true, Client: true,
					DNSNames: []string{name + "." + dom, "localhost"},
					IPs:      append(ips, "127.0.0.1")}, nil
			},
		},
		{id: "etcd-client", issuer: "etcd-signer", doc: "etcd client cert of the kube-apiserver and the etcd operator (openshift-config/etcd-client)", reads: none, spec: client("system:etcd-client")},
		{id: "etcd-metric-client", issuer: "etcd-metric-signer", doc: "etcd metrics client cert (openshift-config/etcd-metric-client)", reads: none, spec: client("system:etcd-metric-client")},
		{
			id: "kube-apiserver", issuer: "kubernetes",
			doc: "bootstrap kube-apiserver serving cert: localhost, api, api-int, VIP, bootstrap and master IPs, first service IP",
			reads: func(*lab.Config) []string {
				r := append(domainReads[:2:2], lab.NetworkAPIVIP, lab.NetworkServiceNetwork)
				return append(r, nodeIPs(bootAndMasters...)...)
			},
			spec: func(s *engine.Step) (pki.Spec, error) {
				dom, err := clusterDomain(s)
				if err != nil {
					return pki.Spec{}, err
				}
				vip, err := s.String(lab.NetworkAPIVIP)
				if err != nil {
					return pki.Spec{}, err
				}
				svc, err := pkiServiceIP(s)
				if err != nil {
					return pki.Spec{}, err
				}
				ips, err := pkiNodeIPs(s, bootAndMasters)
				if err != nil {
					return pki.Spec{}, err
				}
				return pki.Spec{CommonName: "kube-apiserver", Server: true, Client: true,
					DNSNames: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
						"kubernetes.default.svc.cluster.local", "api." + dom, "api-int." + dom, "localhost"},
					IPs: append(append([]string{vip}, ips...), "127.0.0.1", svc)}, nil
			},
		},
		{id: "kube-apiserver-kubelet-client", issuer: "kubernetes", doc: "kube-apiserver's client cert to kubelets", reads: none, spec: client("system:kube-apiserver", "kube-master")},
		{id: "kube-controller-manager", issuer: "kubernetes", doc: "kube-controller-manager client cert", reads: none, spec: client("system:kube-controller-manager")},
		{id: "kube-scheduler", issuer: "kubernetes", doc: "kube-scheduler client cert", reads: none, spec: client("system:kube-scheduler")},
		{id: "front-proxy-client", issuer: "front-proxy", doc: "aggregator (front-proxy) client cert, CN in --requestheader-allowed-names", reads: none, spec: client("system:openshift-aggregator")},
		{id: "admin", issuer: "kubernetes", doc: "cluster-admin client cert (system:admin in system:masters)", reads: none, spec: client("system:admin", "system:masters")},
		{
			id: "machine-config-server", issuer: "root",
			doc: "machine-config-server serving cert for api-int and, in-cluster, the API VIPs (Secret openshift-machine-config-operator/machine-config-server-tls, mounted by the MCS DaemonSet after the pivot)",
			// In-cluster mode (platform BareMetal) also reads the VIPs.
			reads: func(c *lab.Config) []string { return addReads(domainReads[:2:2], vipPlatformReads(c)...) },
			spec: func(s *engine.Step) (pki.Spec, error) {
				dom, err := clusterDomain(s)
				if err != nil {
					return pki.Spec{}, err
				}
				// installer 4.18 pkg/asset/tls/mcscertkey.go MCSCertKey.Generate: CN
				// system:machine-config-server, DNS api-int.<domain>; on platform baremetal
				// every API VIP as an IP SAN and as a DNS SAN (installConfig BareMetal.APIVIPs),
				// so a node that fetches its pointer Ignition from https://<apiVIP>:22623 trusts it.
				sp := pki.Spec{CommonName: "system:machine-config-server", Server: true, DNSNames: []string{"api-int." + dom}}
				bm, err := vipBareMetal(s)
				if err != nil {
					return pki.Spec{}, err
				}
				if bm != nil {
					sp.IPs = append(sp.IPs, bm.APIVIPs...)
					sp.DNSNames = append(sp.DNSNames, bm.APIVIPs...)
				}
				return sp, nil
			},
		},
		// kube-proxy's own identity on the masters: system:kube-proxy is bound to
		// system:node-proxier by the kube-apiserver's bootstrap RBAC policy, and unlike the
		// kubelet bootstrap certificate it lives pki.certDays, so the static pod keeps
		// authenticating after the bootstrap is gone (docs/past-the-pivot.md).
		{id: "kube-proxy", issuer: "kubernetes", doc: "masters' kube-proxy client cert (system:kube-proxy, long-lived)", reads: none, spec: client("system:kube-proxy")},
		// The nodes' bootstrap credential, the installer's (pkg/asset/tls/kubelet.go
		// KubeletClientCertKey): the MCO node-bootstrapper service account's user name and
		// groups, which cluster-machine-approver requires of a kubelet's client CSR
		// (isReqFromNodeBootstrapper), bound to system:node-bootstrapper by the
		// system-bootstrap-node-bootstrapper ClusterRoleBinding; ten years (pki.caDays) from
		// kubelet-bootstrap-signer. Issue 38 #10.
		// The kube-controller-manager-operator's CSR signer, minted here instead of in the
		// cluster (issue 38): cluster-kube-controller-manager-operator release-4.18
		// pkg/operator/certrotationcontroller/certrotationcontroller.go "CSRSigningCert" makes
		// Secret csr-signer (RotatedSelfSignedCertKeySecret, SignerRotation "kube-csr-signer",
		// Validity 30 days, Refresh 15) from csr-signer-signer, the kubelet signer, and the
		// masters' kube-controller-manager signs kubelet client and serving certificates with it
		// (targetconfigcontroller.go ManageCSRSigner). The CSR signer returns the leaf alone
		// (kubernetes pkg/controller/certificates/signer/signer.go sign), so the bootstrap
		// kube-apiserver, which trusts only the kubelet signer in the installer's layout, refuses
		// every kubelet a master's kube-controller-manager signed for once it holds the leader
		// lease before the pivot: the kubelets get "Unauthorized", their pods' readiness never
		// arrives, and bootstrap-complete never comes. Handed over with its certrotation
		// annotations it is kept (library-go certrotation target.go needNewTargetCertKeyPair: in
		// validity, issuer kubelet-signer in csr-controller-signer-ca, and less than the
		// rotation's 15-day Refresh after its NotBefore, the epoch), and the bootstrap's client
		// CA and kubelet CA bundles hold it. It lives pki.certDays like the other leaves, not the
		// operator's 30 days: a renewal rebuilds the bootstrap's files, which a lab kept for
		// weeks should not see every 15 days. An install more than 15 days after the epoch gets
		// the operator's own csr-signer again, and with it the installer's race.
		{id: "csr-signer", issuer: "kubelet-signer",
			doc:   "the kube-controller-manager-operator's csr-signer (an intermediate of kubelet-signer): the masters' kube-controller-manager signs kubelet certificates with it, and the bootstrap kube-apiserver trusts it",
			reads: none,
			spec: func(s *engine.Step) (pki.Spec, error) {
				// SignerRotation.NewCertificate's name: <SignerName>_@<unix seconds>.
				return pki.Spec{CommonName: fmt.Sprintf("kube-csr-signer_@%d", s.Epoch().Unix()), CA: true}, nil
			}},
		{id: "kubelet-bootstrap", issuer: "kubelet-bootstrap-signer", caLife: true, doc: "nodes' bootstrap client cert (the node-bootstrapper service account's identity, pki.caDays)", reads: none,
			spec: client(csr.NodeBootstrapperSA, "system:serviceaccounts:openshift-machine-config-operator", "system:serviceaccounts")},
	}
	leaves = append(leaves, mirrorLeaves(c)...)
	if c.Baremetal() {
		leaves = append(leaves, pkiLeaf{
			id: "bmc-server", issuer: "bmc",
			doc:   "virtual BMC serving cert (platform baremetal): the lab bridge's address, network.gateway, where bmc/service listens",
			reads: func(*lab.Config) []string { return []string{lab.NetworkGateway} },
			spec: func(s *engine.Step) (pki.Spec, error) {
				gw, err := s.String(lab.NetworkGateway)
				if err != nil {
					return pki.Spec{}, err
				}
				return pki.Spec{CommonName: "labbuild-bmc", Server: true, IPs: []string{gw}}, nil
			},
		})
	}
	return leaves
}

func pkiNodeIPs(s *engine.Step, names []string) ([]string, error) {
	var ips []string
	for _, n := range names {
		ip, err := s.String(lab.NodePath(n, lab.NodeIP))
		if err != nil {
			return nil, err
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

// pkiServiceIP is the first host of network.serviceNetwork: the kubernetes Service's
// ClusterIP (172.30.0.1 by default; OTHW hard-codes it).
func pkiServiceIP(s *engine.Step) (string, error) {
	cidr, err := s.String(lab.NetworkServiceNetwork)
	if err != nil {
		return "", err
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", fmt.Errorf("network.serviceNetwork %q: %w", cidr, err)
	}
	return p.Masked().Addr().Next().String(), nil
}

// pkiKeyIDs lists every key: one per CA and leaf, plus the service-account signing key.
func pkiKeyIDs(c *lab.Config) []string {
	var ids []string
	for _, ca := range pkiCAsOf(c) {
		ids = append(ids, ca.id)
	}
	for _, l := range pkiLeaves(c) {
		ids = append(ids, l.id)
	}
	return append(ids, "service-account")
}

// pkiStaleAt is when a certificate issued at epoch (valid until notAfter) should be renewed:
// when less than pct percent of its lifetime is left.
func pkiStaleAt(epoch, notAfter time.Time, pct int) time.Time {
	life := notAfter.Sub(epoch)
	return notAfter.Add(-life * time.Duration(pct) / 100)
}

// pkiIssue is the shared Run of CAs and leaves: load the key (and the issuer), issue, write
// tls.crt, and record when it goes stale.
func pkiIssue(s *engine.Step, id, issuer string, spec pki.Spec, validity time.Duration) error {
	key, err := s.DepFile("pki/key/"+id, "tls.key")
	if err != nil {
		return err
	}
	var iss *pki.Issuer
	if issuer != "" {
		crt, err := s.DepFile("pki/ca/"+issuer, "tls.crt")
		if err != nil {
			return err
		}
		ik, err := s.DepFile("pki/key/"+issuer, "tls.key")
		if err != nil {
			return err
		}
		iss = &pki.Issuer{CertPEM: crt, KeyPEM: ik}
	}
	var pct int
	if err := s.Value(lab.PKIRenewPercent, &pct); err != nil {
		return err
	}
	spec.Validity = validity
	crt, notAfter, err := pki.Issue(spec, key, iss, s.Epoch())
	if err != nil {
		return err
	}
	s.SetStaleAt(pkiStaleAt(s.Epoch(), notAfter, pct))
	return s.WriteFile("tls.crt", crt, 0o644)
}

// pkiOperatorSigners are the CAs handed over as Secrets whose keys OpenShift's operators sign
// with after the pivot: the kube-apiserver-operator's serving and client signers, the
// kube-controller-manager-operator's csr-signer-signer (kubelet-signer) and the
// cluster-etcd-operator's etcd signers. Their certificates come from library-go
// pkg/crypto/crypto.go, whose templates (newSigningCertificateTemplateForDuration,
// newServerCertificateTemplateForDuration, NewClientCertificateTemplateForDuration) fix
// SignatureAlgorithm x509.SHA256WithRSA, so an ECDSA signer key fails there with "x509:
// requested SignatureAlgorithm does not match private key type" (CertRotation_*_Degraded,
// measured with the real 4.18 operators: docs/past-the-pivot.md). Under pki.keyAlgorithm
// ECDSA-P256 their keys are therefore RSA-2048, openshift-install's size.
var pkiOperatorSigners = append([]string{"front-proxy", "kube-apiserver-to-kubelet-signer", "kubelet-signer", "csr-signer",
	"etcd-signer", "etcd-metric-signer"}, pkiServingSigners...)

// pkiKeyAlgorithm is the algorithm of key id when lab.yaml asks for alg: alg itself, except
// RSA-2048 for an operator's signer when alg is not RSA (pkiOperatorSigners says why).
func pkiKeyAlgorithm(id, alg string) string {
	if alg == pki.ECDSAP256 && slices.Contains(pkiOperatorSigners, id) {
		return pki.RSA2048
	}
	return alg
}

func pkiTargets(c *lab.Config) []*engine.Target {
	var ts []*engine.Target
	for _, id := range pkiKeyIDs(c) {
		version := 1
		if pkiKeyAlgorithm(id, c.PKI.KeyAlgorithm) != c.PKI.KeyAlgorithm {
			// A lab whose signer keys were made ECDSA before pkiOperatorSigners gets RSA ones;
			// every other key (all of an RSA lab's) keeps its version, so it is kept.
			version = 2
		}
		ts = append(ts, &engine.Target{
			Name:    "pki/key/" + id,
			Doc:     "private key of " + id + " (sticky: made once, kept until pki.keyAlgorithm changes or --regenerate)",
			Reads:   []string{lab.PKIKeyAlgorithm},
			Version: version,
			Sticky:  true,
			Run: func(ctx context.Context, s *engine.Step) error {
				alg, err := s.String(lab.PKIKeyAlgorithm)
				if err != nil {
					return err
				}
				alg = pkiKeyAlgorithm(id, alg)
				k, err := pki.GenerateKey(alg, rand.Reader)
				if err != nil {
					return fmt.Errorf("pki.keyAlgorithm: %w", err)
				}
				return s.WriteFile("tls.key", k, 0o600)
			},
		})
	}
	for _, ca := range pkiCAsOf(c) {
		ca := ca
		ts = append(ts, &engine.Target{
			Name:    "pki/ca/" + ca.id,
			Doc:     ca.doc,
			Deps:    []string{"pki/key/" + ca.id},
			Reads:   []string{lab.PKICADays, lab.PKIRenewPercent},
			Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error {
				var days int
				if err := s.Value(lab.PKICADays, &days); err != nil {
					return err
				}
				spec := pki.Spec{CommonName: ca.cn, OrganizationalUnit: []string{"openshift"}, CA: true}
				return pkiIssue(s, ca.id, "", spec, time.Duration(days)*24*time.Hour)
			},
		})
	}
	for _, l := range pkiLeaves(c) {
		l := l
		reads := append([]string{lab.PKIRenewPercent}, l.reads(c)...)
		switch {
		case l.short:
			reads = append(reads, lab.PKIBootstrapHours)
		case l.caLife:
			reads = append(reads, lab.PKICADays)
		default:
			reads = append(reads, lab.PKICertDays)
		}
		ts = append(ts, &engine.Target{
			Name:    "pki/cert/" + l.id,
			Doc:     l.doc,
			Deps:    []string{"pki/key/" + l.id, "pki/ca/" + l.issuer, "pki/key/" + l.issuer},
			Reads:   reads,
			Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error {
				spec, err := l.spec(s)
				if err != nil {
					return err
				}
				var validity time.Duration
				switch {
				case l.short:
					var h int
					if err := s.Value(lab.PKIBootstrapHours, &h); err != nil {
						return err
					}
					validity = time.Duration(h) * time.Hour
				case l.caLife:
					var d int
					if err := s.Value(lab.PKICADays, &d); err != nil {
						return err
					}
					validity = time.Duration(d) * 24 * time.Hour
				default:
					var d int
					if err := s.Value(lab.PKICertDays, &d); err != nil {
						return err
					}
					validity = time.Duration(d) * 24 * time.Hour
				}
				return pkiIssue(s, l.id, l.issuer, spec, validity)
			},
		})
	}
	for _, b := range pkiBundles {
		b := b
		var deps []string
		for _, ca := range b.cas {
			if !strings.HasPrefix(ca, "pki/") {
				ca = "pki/ca/" + ca
			}
			deps = append(deps, ca)
		}
		ts = append(ts, &engine.Target{
			Name: "pki/bundle/" + b.id, Doc: b.doc, Deps: deps, Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error {
				var out []byte
				for _, d := range deps {
					crt, err := s.DepFile(d, "tls.crt")
					if err != nil {
						return err
					}
					out = append(out, crt...)
				}
				return s.WriteFile("ca-bundle.crt", out, 0o644)
			},
		})
	}
	ts = append(ts, &engine.Target{
		Name:    "pki/sa",
		Doc:     "service-account token verification key (sa.pub, PKIX PEM): --service-account-key-file",
		Deps:    []string{"pki/key/service-account"},
		Version: 1,
		Run: func(ctx context.Context, s *engine.Step) error {
			k, err := s.DepFile("pki/key/service-account", "tls.key")
			if err != nil {
				return err
			}
			pub, err := pki.PublicKeyPEM(k)
			if err != nil {
				return err
			}
			return s.WriteFile("sa.pub", pub, 0o644)
		},
	})
	return ts
}

func init() {
	Register(Family{Name: "pki", Doc: "keys (sticky), CAs and certificates of the control plane", Targets: fromConfig(pkiTargets)})
}

// CertInfo is one built certificate as `labbuild certs` shows it.
type CertInfo struct {
	Target   string    `json:"target"` // pki/ca/<id> or pki/cert/<id>
	Subject  string    `json:"subject"`
	Issuer   string    `json:"issuer"`
	DNSNames []string  `json:"dnsNames,omitempty"`
	IPs      []string  `json:"ips,omitempty"`
	Usages   []string  `json:"usages"` // "CA", "serverAuth", "clientAuth"
	NotAfter time.Time `json:"notAfter"`
	// Left is the time to NotAfter from the report's clock, in seconds (negative once expired).
	Left int64 `json:"leftSeconds"`
	// RenewAt is the certificate's own renewal point: the stale time its target recorded
	// (Step.SetStaleAt: NotAfter less pki.renewPercent of its life), after which the next build
	// issues it again. Certs leaves it nil; the CLI fills it from the state (labbuild certs).
	RenewAt *time.Time `json:"renewAt,omitempty"`
}

// Certs reads every built certificate under outDir (out/pki/{ca,cert}/<id>/tls.crt), sorted by
// target name. It reads only certificates, never keys.
func Certs(outDir string, now time.Time) ([]CertInfo, error) {
	var infos []CertInfo
	for _, kind := range []string{"ca", "cert"} {
		dir := filepath.Join(outDir, "pki", kind)
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, err
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name(), "tls.crt")
			b, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			} else if err != nil {
				return nil, err
			}
			c, err := pki.ParseCert(b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			in := CertInfo{Target: "pki/" + kind + "/" + e.Name(), Subject: c.Subject.String(), Issuer: c.Issuer.String(),
				DNSNames: c.DNSNames, NotAfter: c.NotAfter.UTC(), Left: int64(c.NotAfter.Sub(now) / time.Second)}
			for _, ip := range c.IPAddresses {
				in.IPs = append(in.IPs, ip.String())
			}
			if c.IsCA {
				in.Usages = append(in.Usages, "CA")
			}
			for _, u := range c.ExtKeyUsage {
				switch u {
				case x509.ExtKeyUsageServerAuth:
					in.Usages = append(in.Usages, "serverAuth")
				case x509.ExtKeyUsageClientAuth:
					in.Usages = append(in.Usages, "clientAuth")
				}
			}
			infos = append(infos, in)
		}
	}
	return infos, nil
}

// mirrorLeaves is the mirror's serving certificate, a pkiLeaves row when the lab has a mirror:
// the bridge address (what the nodes dial, network.gateway), 127.0.0.1 and localhost (what
// labbuild dials).
func mirrorLeaves(c *lab.Config) []pkiLeaf {
	if c == nil || !c.MirrorOn() {
		return nil
	}
	return []pkiLeaf{{
		id: "mirror", issuer: "mirror-ca",
		doc:   "the release mirror registry's serving cert: network.gateway, 127.0.0.1, localhost",
		reads: func(*lab.Config) []string { return []string{lab.NetworkGateway} },
		spec: func(s *engine.Step) (pki.Spec, error) {
			gw, err := s.String(lab.NetworkGateway)
			if err != nil {
				return pki.Spec{}, err
			}
			return pki.Spec{CommonName: "labbuild-mirror", Server: true, DNSNames: []string{"localhost"}, IPs: []string{gw, "127.0.0.1"}}, nil
		},
	}}
}
