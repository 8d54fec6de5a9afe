package rehearsal

// What the kube-apiserver-operator and the kube-controller-manager-operator read from the
// cluster for the masters' control plane (issue 24). The masters' stand-ins take these inputs
// only from the cluster objects those operators read at release-4.18, never from labbuild's
// files or the bootstrap node, and fail naming the object that is missing, so a handover gap
// that would stop the real operator stops the rehearsal at the same step. docs/rehearsal.md
// has the table.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/labbuild/labbuild/targets/kube"
)

var (
	infrastructures = kube.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "infrastructures"}
	networkConfigs  = kube.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "networks"}
)

// MissingObjectError is a stand-in's refusal: the object an operator reads is not in the
// cluster (or lacks the key it reads).
type MissingObjectError struct {
	// Object is "<resource> <namespace>/<name>", or with "[key]" when the key is missing.
	Object string
	// Operator names the upstream code that reads it.
	Operator string
	Err      error
}

func (e *MissingObjectError) Error() string {
	return fmt.Sprintf("%s: %s is missing: %v", e.Operator, e.Object, e.Err)
}

func (e *MissingObjectError) Unwrap() error { return e.Err }

// objectData reads the data map of ConfigMap or Secret ns/name (Secret values base64-decoded).
// keys, when given, must each be present and non-empty.
func objectData(ctx context.Context, dyn kube.Interface, gvr kube.GroupVersionResource, ns, name, reader string, keys ...string) (map[string][]byte, error) {
	kind := strings.TrimSuffix(gvr.Resource, "s")
	o, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, kube.GetOptions{})
	if err != nil {
		return nil, &MissingObjectError{Object: kind + " " + ns + "/" + name, Operator: reader, Err: err}
	}
	raw, _, _ := kube.NestedMap(o.Object, "data")
	out := map[string][]byte{}
	for k, v := range raw {
		s, _ := v.(string)
		if gvr == secrets {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return nil, fmt.Errorf("%s %s/%s[%s]: %w", kind, ns, name, k, err)
			}
			out[k] = b
		} else {
			out[k] = []byte(s)
		}
	}
	for _, k := range keys {
		if len(out[k]) == 0 {
			return nil, &MissingObjectError{Object: kind + " " + ns + "/" + name + "[" + k + "]", Operator: reader, Err: errors.New("no such key")}
		}
	}
	return out, nil
}

// sortedValues concatenates m's values in key order.
func sortedValues(m map[string][]byte) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []byte
	for _, k := range keys {
		v := m[k]
		out = append(out, v...)
		if len(v) > 0 && v[len(v)-1] != '\n' {
			out = append(out, '\n')
		}
	}
	return out
}

// KASInputs are what the kube-apiserver-operator gives a master's kube-apiserver, read from the
// cluster objects it reads (cluster-kube-apiserver-operator release-4.18).
type KASInputs struct {
	// SAPublicKeys is --service-account-key-file: every key of
	// openshift-config-managed/sa-token-signing-certs (resourcesynccontroller.go copies it;
	// starter.go RevisionConfigMaps requires it, so without it no revision is made) and the
	// public half of openshift-kube-apiserver-operator/next-bound-service-account-signing-key
	// (boundsatokensignercontroller/controller.go ensurePublicKeyConfigMap →
	// bound-sa-token-signing-certs), PEM.
	SAPublicKeys []byte
	// SASigningKey is --service-account-signing-key-file: next-bound-service-account-signing-key's
	// service-account.key (ensureOperandSigningSecret copies it to
	// bound-service-account-signing-key).
	SASigningKey []byte
	// ClientCA is --client-ca-file: targetconfigcontroller.go ManageClientCABundle's sources
	// that an install hands over: openshift-config/admin-kubeconfig-client-ca,
	// openshift-config-managed/csr-controller-ca and
	// openshift-config-managed/kubelet-bootstrap-kubeconfig (the operator's own signers, minted
	// after the pivot, sign no client the rehearsal has).
	ClientCA []byte
	// KubeletCA is --kubelet-certificate-authority: kubelet-serving-ca, which
	// resourcesynccontroller.go syncs from openshift-config-managed/csr-controller-ca.
	KubeletCA []byte
	// Signers are the serving signers certrotationcontroller.go NewCertRotationController reads
	// (Secrets loadbalancer-serving-signer, localhost-serving-signer,
	// service-network-serving-signer in openshift-kube-apiserver-operator), by Secret name.
	Signers map[string]Signer
	// LBNames are the load-balancer serving names: the hosts of Infrastructure cluster's
	// status.apiServerURL and apiServerInternalURI (certrotationcontroller.go
	// syncLoadBalancerHostnames).
	LBNames []string
	// ServiceIP is the kubernetes Service's ClusterIP: the first address of Network cluster's
	// spec.serviceNetwork (syncServiceHostnames).
	ServiceIP string
	// KubeletClientSigner is Secret openshift-kube-apiserver-operator/
	// kube-apiserver-to-kubelet-signer, from which certrotationcontroller.go
	// NewCertRotationController mints kubelet-client (CN system:kube-apiserver, O kube-master):
	// --kubelet-client-certificate/-key (bindata/assets/config/defaultconfig.yaml
	// kubeletClientInfo).
	KubeletClientSigner Signer
	// AggregatorSigner is Secret openshift-kube-apiserver-operator/aggregator-client-signer,
	// from which the same controller mints aggregator-client (CN system:openshift-aggregator):
	// --proxy-client-cert-file/-key-file (defaultconfig.yaml proxy-client-cert-file).
	AggregatorSigner Signer
	// AggregatorCA is --requestheader-client-ca-file: openshift-config-managed/
	// kube-apiserver-aggregator-client-ca, which resourcesynccontroller.go copies to
	// openshift-kube-apiserver/aggregator-client-ca (defaultconfig.yaml
	// requestheader-client-ca-file).
	AggregatorCA []byte
}

// kaoReader names the upstream code a missing object stops.
const kaoReader = "kube-apiserver-operator (cluster-kube-apiserver-operator release-4.18)"

// ReadKASInputs reads KASInputs from the cluster. The first missing object is returned as a
// *MissingObjectError naming it.
func ReadKASInputs(ctx context.Context, dyn kube.Interface) (KASInputs, error) {
	var in KASInputs
	sa, err := objectData(ctx, dyn, configMaps, "openshift-config-managed", "sa-token-signing-certs", kaoReader+" starter.go RevisionConfigMaps / revision_controller.go createNewRevision")
	if err != nil {
		return in, err
	}
	if len(sa) == 0 {
		return in, &MissingObjectError{Object: "configmap openshift-config-managed/sa-token-signing-certs[*.pub]", Operator: kaoReader, Err: errors.New("no keys")}
	}
	nb, err := objectData(ctx, dyn, secrets, "openshift-kube-apiserver-operator", "next-bound-service-account-signing-key",
		kaoReader+" boundsatokensignercontroller ensureNextOperatorSigningSecret (would mint a key the bootstrap's tokens do not verify with)",
		"service-account.key", "service-account.pub")
	if err != nil {
		return in, err
	}
	in.SAPublicKeys = append(sortedValues(sa), nb["service-account.pub"]...)
	in.SASigningKey = nb["service-account.key"]
	for _, src := range []struct{ ns, name string }{
		{"openshift-config", "admin-kubeconfig-client-ca"},
		{"openshift-config-managed", "csr-controller-ca"},
		{"openshift-config-managed", "kubelet-bootstrap-kubeconfig"},
	} {
		d, err := objectData(ctx, dyn, configMaps, src.ns, src.name, kaoReader+" targetconfigcontroller.go ManageClientCABundle", "ca-bundle.crt")
		if err != nil {
			return in, err
		}
		in.ClientCA = append(in.ClientCA, d["ca-bundle.crt"]...)
		if src.name == "csr-controller-ca" {
			in.KubeletCA = d["ca-bundle.crt"]
		}
	}
	in.Signers = map[string]Signer{}
	for _, name := range []string{"loadbalancer-serving-signer", "localhost-serving-signer", "service-network-serving-signer"} {
		d, err := objectData(ctx, dyn, secrets, "openshift-kube-apiserver-operator", name,
			kaoReader+" certrotationcontroller.go NewCertRotationController (would mint a signer no kubeconfig trusts)", "tls.crt", "tls.key")
		if err != nil {
			return in, err
		}
		in.Signers[name] = Signer{Cert: d["tls.crt"], Key: d["tls.key"]}
	}
	for _, sg := range []struct {
		name string
		into *Signer
	}{{"kube-apiserver-to-kubelet-signer", &in.KubeletClientSigner}, {"aggregator-client-signer", &in.AggregatorSigner}} {
		d, err := objectData(ctx, dyn, secrets, "openshift-kube-apiserver-operator", sg.name, kaoReader+" certrotationcontroller.go NewCertRotationController", "tls.crt", "tls.key")
		if err != nil {
			return in, err
		}
		*sg.into = Signer{Cert: d["tls.crt"], Key: d["tls.key"]}
	}
	agg, err := objectData(ctx, dyn, configMaps, "openshift-config-managed", "kube-apiserver-aggregator-client-ca",
		kaoReader+" resourcesynccontroller.go (aggregator-client-ca)", "ca-bundle.crt")
	if err != nil {
		return in, err
	}
	in.AggregatorCA = agg["ca-bundle.crt"]
	infra, err := dyn.Resource(infrastructures).Get(ctx, "cluster", kube.GetOptions{})
	if err != nil {
		return in, &MissingObjectError{Object: "infrastructure cluster", Operator: kaoReader + " certrotationcontroller.go", Err: err}
	}
	for _, f := range []string{"apiServerURL", "apiServerInternalURI"} {
		s, _, _ := kube.NestedString(infra.Object, "status", f)
		u, err := url.Parse(s)
		if s == "" || err != nil || u.Hostname() == "" {
			return in, &MissingObjectError{Object: "infrastructure cluster[status." + f + "]", Operator: kaoReader + " certrotationcontroller.go", Err: fmt.Errorf("%q", s)}
		}
		in.LBNames = append(in.LBNames, u.Hostname())
	}
	nw, err := dyn.Resource(networkConfigs).Get(ctx, "cluster", kube.GetOptions{})
	if err != nil {
		return in, &MissingObjectError{Object: "network.config.openshift.io cluster", Operator: kaoReader + " certrotationcontroller.go", Err: err}
	}
	svc, _, _ := kube.NestedSlice(nw.Object, "spec", "serviceNetwork")
	if len(svc) == 0 {
		return in, &MissingObjectError{Object: "network.config.openshift.io cluster[spec.serviceNetwork]", Operator: kaoReader, Err: errors.New("empty")}
	}
	p, err := netip.ParsePrefix(fmt.Sprint(svc[0]))
	if err != nil {
		return in, fmt.Errorf("network cluster spec.serviceNetwork: %w", err)
	}
	in.ServiceIP = p.Masked().Addr().Next().String()
	return in, nil
}

// EnsureKASClientSigners is the kube-apiserver-operator's client-certificate rotation, once
// for the cluster (cluster-kube-apiserver-operator release-4.18
// pkg/operator/certrotationcontroller/certrotationcontroller.go NewCertRotationController):
// for Secrets aggregator-client-signer and kube-apiserver-to-kubelet-signer in
// openshift-kube-apiserver-operator it keeps the handed-over signer, or mints a self-signed one
// when the Secret is missing — as library-go certrotation RotatedSigningCASecret
// EnsureSigningCertKeyPair does (NotFound → a new CA named "<namespace>_<name>@<unix time>"),
// which is why a missing signer stops no operator — and puts each signer's certificate into its
// CA bundle ConfigMap (CABundleConfigMap EnsureConfigMapCABundle):
// openshift-config-managed/kube-apiserver-aggregator-client-ca and
// openshift-kube-apiserver-operator/kube-apiserver-to-kubelet-client-ca. It also writes
// openshift-config-managed/kube-apiserver-server-ca from the three serving signers
// (targetconfigcontroller.go manageKubeAPIServerCABundle, through their *-serving-ca bundles),
// which the kube-controller-manager-operator reads for --root-ca-file. A signer minted here is
// one the kubelets do not trust (their kubelet-ca.crt is the MCO render's), so the post-pivot
// kube-apiserver's logs and exec would then fail, as they would on a real cluster until the
// machine-config-daemon writes the new bundle.
func EnsureKASClientSigners(ctx context.Context, dyn kube.Interface) error {
	for _, sg := range []struct{ secret, bundleNS, bundle string }{
		{"aggregator-client-signer", "openshift-config-managed", "kube-apiserver-aggregator-client-ca"},
		{"kube-apiserver-to-kubelet-signer", "openshift-kube-apiserver-operator", "kube-apiserver-to-kubelet-client-ca"},
	} {
		signer, err := ensureSigner(ctx, dyn, "openshift-kube-apiserver-operator", sg.secret)
		if err != nil {
			return err
		}
		if err := ensureBundle(ctx, dyn, sg.bundleNS, sg.bundle, signer.Cert); err != nil {
			return err
		}
	}
	for _, name := range []string{"loadbalancer-serving-signer", "localhost-serving-signer", "service-network-serving-signer"} {
		d, err := objectData(ctx, dyn, secrets, "openshift-kube-apiserver-operator", name,
			kaoReader+" certrotationcontroller.go NewCertRotationController (would mint a signer no kubeconfig trusts)", "tls.crt")
		if err != nil {
			return err
		}
		if err := ensureBundle(ctx, dyn, "openshift-config-managed", "kube-apiserver-server-ca", d["tls.crt"]); err != nil {
			return err
		}
	}
	return nil
}

// ensureSigner reads the kubernetes.io/tls Secret ns/name, or creates it with a new
// self-signed CA when it is missing (certrotation's RotatedSigningCASecret). A concurrent
// creation by another master's stand-in is read back.
func ensureSigner(ctx context.Context, dyn kube.Interface, ns, name string) (Signer, error) {
	o, err := dyn.Resource(secrets).Namespace(ns).Get(ctx, name, kube.GetOptions{})
	if err == nil {
		crt, _, _ := kube.NestedString(o.Object, "data", "tls.crt")
		key, _, _ := kube.NestedString(o.Object, "data", "tls.key")
		c, cerr := base64.StdEncoding.DecodeString(crt)
		k, kerr := base64.StdEncoding.DecodeString(key)
		if cerr != nil || kerr != nil || len(c) == 0 || len(k) == 0 {
			return Signer{}, fmt.Errorf("secret %s/%s has no tls.crt/tls.key", ns, name)
		}
		return Signer{Cert: c, Key: k}, nil
	}
	if !kube.IsNotFound(err) {
		return Signer{}, fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	crt, key, err := selfSignedCA(fmt.Sprintf("%s_%s@%d", ns, name, time.Now().Unix()))
	if err != nil {
		return Signer{}, err
	}
	sec := &kube.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     map[string]any{"tls.crt": base64.StdEncoding.EncodeToString(crt), "tls.key": base64.StdEncoding.EncodeToString(key)}}}
	if _, err := dyn.Resource(secrets).Namespace(ns).Create(ctx, sec, kube.CreateOptions{}); kube.IsAlreadyExists(err) {
		return ensureSigner(ctx, dyn, ns, name)
	} else if err != nil {
		return Signer{}, fmt.Errorf("create secret %s/%s: %w", ns, name, err)
	}
	return Signer{Cert: crt, Key: key}, nil
}

// ensureBundle makes ConfigMap ns/name's ca-bundle.crt hold cert (created when missing),
// as certrotation's CABundleConfigMap keeps a signer's certificate in its bundle.
func ensureBundle(ctx context.Context, dyn kube.Interface, ns, name string, cert []byte) error {
	cms := dyn.Resource(configMaps).Namespace(ns)
	o, err := cms.Get(ctx, name, kube.GetOptions{})
	if kube.IsNotFound(err) {
		cm := &kube.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": ns}, "data": map[string]any{"ca-bundle.crt": string(cert)}}}
		if _, err := cms.Create(ctx, cm, kube.CreateOptions{}); kube.IsAlreadyExists(err) {
			return ensureBundle(ctx, dyn, ns, name, cert)
		} else if err != nil {
			return fmt.Errorf("create configmap %s/%s: %w", ns, name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("configmap %s/%s: %w", ns, name, err)
	}
	bundle, _, _ := kube.NestedString(o.Object, "data", "ca-bundle.crt")
	if strings.Contains(bundle, strings.TrimSpace(string(cert))) {
		return nil
	}
	if bundle != "" && !strings.HasSuffix(bundle, "\n") {
		bundle += "\n"
	}
	patch := fmt.Sprintf(`{"data":{"ca-bundle.crt":%q}}`, bundle+string(cert))
	_, err = cms.Patch(ctx, name, kube.MergePatchType, []byte(patch), kube.PatchOptions{})
	return err
}

// selfSignedCA makes a self-signed ECDSA P-256 CA for cn, valid 30 days (the operator's
// client signers' Validity), PEM.
func selfSignedCA(cn string) (certPEM, keyPEM []byte, err error) {
	now := time.Now()
	return mint(&x509.Certificate{Subject: pkix.Name{CommonName: cn}, NotBefore: now.Add(-time.Minute),
		NotAfter: now.Add(30 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}, nil, nil)
}

// mint makes a new ECDSA P-256 key and signs tmpl (given a random serial) for it with parent
// and parentKey, or self-signed when parent is nil. It returns the certificate and key, PEM.
func mint(tmpl, parent *x509.Certificate, parentKey any) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber, _ = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// ServingCert is a certificate and key, PEM, with the names it serves.
type ServingCert struct {
	Cert, Key []byte
	Names     []string
}

// ServingCerts mints the kube-apiserver's three serving certificates as the operator's
// certrotation does (RotatedSelfSignedCertKeySecret with ServingRotation): load balancer
// (LBNames), localhost and service network, each from its handed-over signer. Keys are by
// the operator's Secret names (loadbalancer-serving-certkey, localhost-serving-cert-certkey,
// service-network-serving-certkey).
func (in KASInputs) ServingCerts() (map[string]ServingCert, error) {
	names := map[string][]string{
		"loadbalancer-serving-certkey":    in.LBNames,
		"localhost-serving-cert-certkey":  {"localhost", "127.0.0.1", "::1"},
		"service-network-serving-certkey": {"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "openshift", "openshift.default", "openshift.default.svc", "openshift.default.svc.cluster.local", in.ServiceIP},
	}
	signer := map[string]string{"loadbalancer-serving-certkey": "loadbalancer-serving-signer", "localhost-serving-cert-certkey": "localhost-serving-signer",
		"service-network-serving-certkey": "service-network-serving-signer"}
	out := map[string]ServingCert{}
	for sec, ns := range names {
		var dns, ips []string
		for _, n := range ns {
			if net.ParseIP(n) != nil {
				ips = append(ips, n)
			} else {
				dns = append(dns, n)
			}
		}
		crt, key, err := in.Signers[signer[sec]].issue(ns[0], nil, ips, dns, true, false, false)
		if err != nil {
			return nil, fmt.Errorf("%s from %s: %w", sec, signer[sec], err)
		}
		out[sec] = ServingCert{Cert: crt, Key: key, Names: ns}
	}
	return out, nil
}

// KCMInputs are what the kube-controller-manager-operator gives a master's
// kube-controller-manager (cluster-kube-controller-manager-operator release-4.18).
type KCMInputs struct {
	// SAPrivateKey is --service-account-private-key-file: openshift-config/
	// initial-service-account-private-key's service-account.key, which
	// satokensigner_controller.go syncWorker copies to service-account-private-key
	// (starter.go deploymentSecrets requires it).
	SAPrivateKey []byte
	// CSRSigner is --cluster-signing-cert-file/-key-file: Secret
	// openshift-kube-controller-manager/csr-signer, which targetconfigcontroller.go
	// ManageCSRSigner copies from the operator's csr-signer, itself signed by csr-signer-signer
	// (certrotationcontroller.go "CSRSigningCert").
	CSRSigner Signer
	// RootCA is --root-ca-file: ConfigMap openshift-kube-controller-manager/serviceaccount-ca,
	// which targetconfigcontroller.go manageServiceAccountCABundle combines from
	// openshift-config-managed/kube-apiserver-server-ca and default-ingress-cert (each skipped
	// when missing, library-go resourcesynccontroller CombineCABundleConfigMaps;
	// bindata/assets/config/defaultconfig.yaml root-ca-file). An empty bundle stops the
	// kube-controller-manager itself (it parses the file at start), so the stand-in refuses one.
	RootCA []byte
}

const kcmoReader = "kube-controller-manager-operator (cluster-kube-controller-manager-operator release-4.18)"

// EnsureCSRSigner is the kube-controller-manager-operator's CSR signer chain, once for the
// cluster, as cluster-kube-controller-manager-operator release-4.18 runs it:
//
//   - certrotationcontroller.go "CSRSigningCert" (library-go certrotation target.go
//     RotatedSelfSignedCertKeySecret.EnsureTargetCertKeyPair): Secret
//     openshift-kube-controller-manager-operator/csr-signer is kept when
//     needNewTargetCertKeyPair finds nothing wrong with it (csrSignerKept: its certrotation
//     annotations in force, not past 80 % of its validity nor its 15-day refresh, its issuer
//     csr-signer-signer's); otherwise a new one is minted from csr-signer-signer (the handed-over
//     kubelet signer; a CA, 30 days, CN kube-csr-signer_@<unix>) and stored there;
//   - targetconfigcontroller.go ManageCSRSigner: copied to openshift-kube-controller-manager/
//     csr-signer when that is missing;
//   - ManageCSRCABundle: it and its signer in openshift-config-managed/csr-controller-ca.
//
// A csr-signer already in openshift-kube-controller-manager is kept, so each master's stand-in
// calls it. Without csr-signer-signer the real operator mints its own signer-signer, whose
// certificates nothing handed over trusts; the stand-in refuses instead, naming it. It returns
// what it did with the operator's csr-signer ("kept", "minted: <reason>"), for the flow's log.
func EnsureCSRSigner(ctx context.Context, dyn kube.Interface) (string, error) {
	ss, err := objectData(ctx, dyn, secrets, "openshift-kube-controller-manager-operator", "csr-signer-signer",
		kcmoReader+` certrotationcontroller.go "CSRSigningCert" (would mint a signer the kube-apiserver's csr-controller-ca lacks)`, "tls.crt", "tls.key")
	if err != nil {
		return "", err
	}
	signerSigner := Signer{Cert: ss["tls.crt"], Key: ss["tls.key"]}
	var cur Signer
	did := "kept"
	if d, err := objectData(ctx, dyn, secrets, "openshift-kube-controller-manager", "csr-signer", kcmoReader, "tls.crt", "tls.key"); err == nil {
		cur = Signer{Cert: d["tls.crt"], Key: d["tls.key"]}
	} else {
		if cur, did, err = operatorCSRSigner(ctx, dyn, signerSigner, time.Now()); err != nil {
			return "", err
		}
		sec := &kube.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
			"metadata": map[string]any{"name": "csr-signer", "namespace": "openshift-kube-controller-manager"},
			"data":     map[string]any{"tls.crt": base64.StdEncoding.EncodeToString(cur.Cert), "tls.key": base64.StdEncoding.EncodeToString(cur.Key)}}}
		_, cerr := dyn.Resource(secrets).Namespace("openshift-kube-controller-manager").Create(ctx, sec, kube.CreateOptions{})
		if kube.IsAlreadyExists(cerr) {
			return EnsureCSRSigner(ctx, dyn) // another master's stand-in won: use its signer
		}
		if cerr != nil {
			return "", fmt.Errorf("create secret openshift-kube-controller-manager/csr-signer: %w", cerr)
		}
	}
	cm, err := objectData(ctx, dyn, configMaps, "openshift-config-managed", "csr-controller-ca", kcmoReader+" targetconfigcontroller.go ManageCSRCABundle")
	if err != nil {
		return "", err
	}
	bundle := string(cm["ca-bundle.crt"])
	changed := false
	for _, c := range [][]byte{cur.Cert, signerSigner.Cert} {
		if !strings.Contains(bundle, strings.TrimSpace(string(c))) {
			bundle += string(c)
			changed = true
		}
	}
	if !changed {
		return did, nil
	}
	patch := fmt.Sprintf(`{"data":{"ca-bundle.crt":%q}}`, bundle)
	_, err = dyn.Resource(configMaps).Namespace("openshift-config-managed").Patch(ctx, "csr-controller-ca", kube.MergePatchType, []byte(patch), kube.PatchOptions{})
	return did, err
}

// operatorCSRSigner is the rotation of Secret openshift-kube-controller-manager-operator/
// csr-signer at now: the stored one when csrSignerKept accepts it, else a new one from
// signerSigner, stored (created, or updated over the refused one).
func operatorCSRSigner(ctx context.Context, dyn kube.Interface, signerSigner Signer, now time.Time) (Signer, string, error) {
	const ns = "openshift-kube-controller-manager-operator"
	o, err := dyn.Resource(secrets).Namespace(ns).Get(ctx, "csr-signer", kube.GetOptions{})
	exists := err == nil
	if err != nil && !kube.IsNotFound(err) {
		return Signer{}, "", err
	}
	reason := "secret doesn't exist"
	if exists {
		d, derr := objectData(ctx, dyn, secrets, ns, "csr-signer", kcmoReader, "tls.crt", "tls.key")
		if derr != nil {
			reason = derr.Error()
		} else if reason = csrSignerKept(o.GetAnnotations(), signerSigner.Cert, now); reason == "" {
			return Signer{Cert: d["tls.crt"], Key: d["tls.key"]}, "kept", nil
		}
	}
	crt, key, err := signerSigner.issue(fmt.Sprintf("kube-csr-signer_@%d", now.Unix()), nil, nil, nil, false, false, true)
	if err != nil {
		return Signer{}, "", fmt.Errorf("csr-signer from csr-signer-signer: %w", err)
	}
	c, _ := pem.Decode(crt)
	cert, err := x509.ParseCertificate(c.Bytes)
	if err != nil {
		return Signer{}, "", err
	}
	sec := &kube.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
		"metadata": map[string]any{"name": "csr-signer", "namespace": ns, "annotations": map[string]any{
			"auth.openshift.io/certificate-not-before": cert.NotBefore.UTC().Format(time.RFC3339),
			"auth.openshift.io/certificate-not-after":  cert.NotAfter.UTC().Format(time.RFC3339),
			"auth.openshift.io/certificate-issuer":     cert.Issuer.CommonName}},
		"data": map[string]any{"tls.crt": base64.StdEncoding.EncodeToString(crt), "tls.key": base64.StdEncoding.EncodeToString(key)}}}
	if exists {
		sec.Object["metadata"].(map[string]any)["resourceVersion"] = o.GetResourceVersion()
		_, err = dyn.Resource(secrets).Namespace(ns).Update(ctx, sec, kube.UpdateOptions{})
	} else {
		_, err = dyn.Resource(secrets).Namespace(ns).Create(ctx, sec, kube.CreateOptions{})
	}
	if kube.IsAlreadyExists(err) || kube.IsConflict(err) {
		return operatorCSRSigner(ctx, dyn, signerSigner, now) // another master's stand-in stored one first
	}
	if err != nil {
		return Signer{}, "", fmt.Errorf("store secret %s/csr-signer: %w", ns, err)
	}
	return Signer{Cert: crt, Key: key}, "minted: " + reason, nil
}

// csrSignerKept is library-go certrotation target.go needNewTargetCertKeyPair for the operator's
// csr-signer (Refresh 15 days, RefreshOnlyWhenExpired false) with csr-signer-signer's
// certificate as the CA bundle: "" when the Secret is kept, else the operator's reason.
func csrSignerKept(ann map[string]string, signerSignerPEM []byte, now time.Time) string {
	notBefore, err1 := time.Parse(time.RFC3339, ann["auth.openshift.io/certificate-not-before"])
	notAfter, err2 := time.Parse(time.RFC3339, ann["auth.openshift.io/certificate-not-after"])
	switch {
	case err1 != nil || err2 != nil:
		return "missing or malformed notBefore/notAfter"
	case now.After(notAfter):
		return "already expired"
	case now.After(notAfter.Add(-notAfter.Sub(notBefore) / 5)):
		return "past refresh time (80% of validity)"
	}
	b, _ := pem.Decode(signerSignerPEM)
	if b == nil {
		return "csr-signer-signer: no PEM block"
	}
	ss, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return "csr-signer-signer: " + err.Error()
	}
	const refresh = 15 * 24 * time.Hour
	if now.After(notBefore.Add(refresh)) && now.After(ss.NotBefore.Add(refresh/10)) {
		return "past its refresh time"
	}
	switch iss := ann["auth.openshift.io/certificate-issuer"]; {
	case iss == "":
		return "missing issuer name"
	case iss != ss.Subject.CommonName:
		return fmt.Sprintf("issuer %q, not in ca bundle", iss)
	}
	return ""
}

// ReadKCMInputs reads KCMInputs from the cluster (after EnsureCSRSigner).
func ReadKCMInputs(ctx context.Context, dyn kube.Interface) (KCMInputs, error) {
	var in KCMInputs
	sa, err := objectData(ctx, dyn, secrets, "openshift-config", "initial-service-account-private-key",
		kcmoReader+" satokensigner_controller.go syncWorker → service-account-private-key (starter.go deploymentSecrets)", "service-account.key")
	if err != nil {
		return in, err
	}
	in.SAPrivateKey = sa["service-account.key"]
	cs, err := objectData(ctx, dyn, secrets, "openshift-kube-controller-manager", "csr-signer", kcmoReader+" targetconfigcontroller.go ManageCSRSigner", "tls.crt", "tls.key")
	if err != nil {
		return in, err
	}
	in.CSRSigner = Signer{Cert: cs["tls.crt"], Key: cs["tls.key"]}
	const sacaReader = kcmoReader + " targetconfigcontroller.go manageServiceAccountCABundle (serviceaccount-ca → --root-ca-file)"
	for _, name := range []string{"kube-apiserver-server-ca", "default-ingress-cert"} {
		d, err := objectData(ctx, dyn, configMaps, "openshift-config-managed", name, sacaReader)
		var missing *MissingObjectError
		if errors.As(err, &missing) && kube.IsNotFound(err) {
			continue
		}
		if err != nil {
			return in, err
		}
		in.RootCA = append(in.RootCA, d["ca-bundle.crt"]...)
	}
	if len(in.RootCA) == 0 {
		return in, &MissingObjectError{Object: "configmap openshift-config-managed/kube-apiserver-server-ca[ca-bundle.crt]", Operator: sacaReader, Err: errors.New("the service-account CA bundle is empty")}
	}
	return in, nil
}

// issue signs a leaf (or, with ca, an intermediate CA) for cn with the given organization, IPs
// and DNS names, ECDSA P-256, valid 30 days (a CA) or 24 h.
func (s Signer) issue(cn string, org []string, ips []string, dns []string, serverAuth, clientAuth, ca bool) (certPEM, keyPEM []byte, err error) {
	cb, _ := pem.Decode(s.Cert)
	kb, _ := pem.Decode(s.Key)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("signer: no PEM block")
	}
	parent, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	parentKey, err := parseKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: cn, Organization: org},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour), DNSNames: dns,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	if ca {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign
		tmpl.NotAfter = now.Add(30 * 24 * time.Hour)
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	if serverAuth {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if clientAuth {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	return mint(tmpl, parent, parentKey)
}

// Node paths where the operators' installer pods put a revision's files on a master
// (/etc/kubernetes/static-pod-resources/<operand>-certs), used by the stand-ins.
const (
	kasCertDir = "/etc/kubernetes/static-pod-resources/kube-apiserver-certs"
	kcmCertDir = "/etc/kubernetes/static-pod-resources/kube-controller-manager-certs"
)

// replaceFlags returns args with each --flag=value in set replaced (value set[flag]) and adds
// appended at the end. A flag of set that args lack is an error: the stand-in would otherwise
// run on a default nobody chose.
func replaceFlags(args []string, set map[string]string, appended ...string) ([]string, error) {
	out := make([]string, 0, len(args)+len(appended))
	seen := map[string]bool{}
	for _, a := range args {
		name, _, ok := strings.Cut(a, "=")
		if v, in := set[name]; ok && in {
			out = append(out, name+"="+v)
			seen[name] = true
			continue
		}
		out = append(out, a)
	}
	for f := range set {
		if !seen[f] {
			return nil, fmt.Errorf("the bootstrap's command line has no %s", f)
		}
	}
	return append(out, appended...), nil
}

// KASFiles are the files a master's kube-apiserver stand-in reads (node path → content) and the
// flags that name them, from in.
func (in KASInputs) KASFiles() (files map[string][]byte, flags map[string]string, extra []string, err error) {
	sc, err := in.ServingCerts()
	if err != nil {
		return nil, nil, nil, err
	}
	// certrotationcontroller.go's client certificates (RotatedSelfSignedCertKeySecret with
	// ClientRotation): kubelet-client and aggregator-client.
	kc, kk, err := in.KubeletClientSigner.issue("system:kube-apiserver", []string{"kube-master"}, nil, nil, false, true, false)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("kubelet-client from kube-apiserver-to-kubelet-signer: %w", err)
	}
	ac, ak, err := in.AggregatorSigner.issue("system:openshift-aggregator", nil, nil, nil, false, true, false)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("aggregator-client from aggregator-client-signer: %w", err)
	}
	p := func(n string) string { return kasCertDir + "/" + n }
	files = map[string][]byte{
		p("secrets/kubelet-client/tls.crt"):                                kc,
		p("secrets/kubelet-client/tls.key"):                                kk,
		p("secrets/aggregator-client/tls.crt"):                             ac,
		p("secrets/aggregator-client/tls.key"):                             ak,
		p("configmaps/aggregator-client-ca/ca-bundle.crt"):                 in.AggregatorCA,
		p("configmaps/sa-token-signing-certs/service-account.pub"):         in.SAPublicKeys,
		p("secrets/bound-service-account-signing-key/service-account.key"): in.SASigningKey,
		p("configmaps/client-ca/ca-bundle.crt"):                            in.ClientCA,
		p("configmaps/kubelet-serving-ca/ca-bundle.crt"):                   in.KubeletCA,
		p("secrets/service-network-serving-certkey/tls.crt"):               sc["service-network-serving-certkey"].Cert,
		p("secrets/service-network-serving-certkey/tls.key"):               sc["service-network-serving-certkey"].Key,
		p("secrets/loadbalancer-serving-certkey/tls.crt"):                  sc["loadbalancer-serving-certkey"].Cert,
		p("secrets/loadbalancer-serving-certkey/tls.key"):                  sc["loadbalancer-serving-certkey"].Key,
		p("secrets/localhost-serving-cert-certkey/tls.crt"):                sc["localhost-serving-cert-certkey"].Cert,
		p("secrets/localhost-serving-cert-certkey/tls.key"):                sc["localhost-serving-cert-certkey"].Key,
	}
	flags = map[string]string{
		"--service-account-key-file":         p("configmaps/sa-token-signing-certs/service-account.pub"),
		"--service-account-signing-key-file": p("secrets/bound-service-account-signing-key/service-account.key"),
		"--client-ca-file":                   p("configmaps/client-ca/ca-bundle.crt"),
		"--kubelet-certificate-authority":    p("configmaps/kubelet-serving-ca/ca-bundle.crt"),
		"--tls-cert-file":                    p("secrets/service-network-serving-certkey/tls.crt"),
		"--tls-private-key-file":             p("secrets/service-network-serving-certkey/tls.key"),
		"--kubelet-client-certificate":       p("secrets/kubelet-client/tls.crt"),
		"--kubelet-client-key":               p("secrets/kubelet-client/tls.key"),
		"--proxy-client-cert-file":           p("secrets/aggregator-client/tls.crt"),
		"--proxy-client-key-file":            p("secrets/aggregator-client/tls.key"),
		"--requestheader-client-ca-file":     p("configmaps/aggregator-client-ca/ca-bundle.crt"),
		// The cluster-etcd-operator's etcd client certificate and bundle (MasterStandins' etcd
		// part issues them from the handed-over etcd-signer).
		"--etcd-cafile":   etcdBundleDir + "/server-ca-bundle.crt",
		"--etcd-certfile": etcdCertDir + "/etcd-client.crt",
		"--etcd-keyfile":  etcdCertDir + "/etcd-client.key",
	}
	// The operator's config serves the load-balancer and localhost certificates by SNI
	// (servingInfo.namedCertificates).
	extra = []string{
		"--tls-sni-cert-key=" + p("secrets/loadbalancer-serving-certkey/tls.crt") + "," + p("secrets/loadbalancer-serving-certkey/tls.key"),
		"--tls-sni-cert-key=" + p("secrets/localhost-serving-cert-certkey/tls.crt") + "," + p("secrets/localhost-serving-cert-certkey/tls.key"),
	}
	return files, flags, extra, nil
}

// KCMFiles are the files a master's kube-controller-manager stand-in reads and the flags that
// name them, from in.
func (in KCMInputs) KCMFiles() (files map[string][]byte, flags map[string]string) {
	p := func(n string) string { return kcmCertDir + "/" + n }
	files = map[string][]byte{
		p("secrets/service-account-private-key/service-account.key"): in.SAPrivateKey,
		p("secrets/csr-signer/tls.crt"):                              in.CSRSigner.Cert,
		p("secrets/csr-signer/tls.key"):                              in.CSRSigner.Key,
		p("configmaps/serviceaccount-ca/ca-bundle.crt"):              in.RootCA,
	}
	flags = map[string]string{
		"--service-account-private-key-file": p("secrets/service-account-private-key/service-account.key"),
		"--cluster-signing-cert-file":        p("secrets/csr-signer/tls.crt"),
		"--cluster-signing-key-file":         p("secrets/csr-signer/tls.key"),
		"--root-ca-file":                     p("configmaps/serviceaccount-ca/ca-bundle.crt"),
	}
	return files, flags
}
