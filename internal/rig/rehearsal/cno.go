package rehearsal

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"

	"github.com/labbuild/labbuild/targets/kube"
)

// TrustedCAInjector is a stand-in for the cluster-network-operator's trusted-CA injection
// (openshift/cluster-network-operator release-4.18): its image cannot run here. It reads only
// what the CNO reads — the Proxy `cluster`, the ConfigMap its spec.trustedCA names, and the
// ConfigMaps labelled TrustedCALabel — all from the cluster, and writes what the CNO writes
// into the labelled ConfigMaps' ca-bundle.crt. The CNO does it in two controllers:
//
//   - pkg/controller/proxyconfig (controller.go Reconcile, validation.go validateTrustedCA,
//     validateConfigMapRef, mergeTrustBundlesToConfigMap): the Proxy's spec.trustedCA.name is
//     a ConfigMap in openshift-config whose ca-bundle.crt must hold PEM certificates
//     (pkg/util/validation TrustBundleConfigMap); it is merged with the system bundle (the
//     CNO container's /etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem, names.SYSTEM_TRUST_BUNDLE)
//     as user bundle + "\n" + system bundle into openshift-config-managed/trusted-ca-bundle;
//     without trustedCA that ConfigMap is the system bundle alone (generateSystemTrustBundle);
//   - pkg/controller/configmap_ca_injector (controller.go ReconcileConfigMapInjector.Reconcile):
//     every ConfigMap labelled config.openshift.io/inject-trusted-cabundle=true
//     (names.TRUSTED_CA_BUNDLE_CONFIGMAP_LABEL) gets trusted-ca-bundle's ca-bundle.crt.
//
// The stand-in writes the merged bundle straight into the labelled ConfigMaps (the
// intermediate trusted-ca-bundle is not written). Its system bundle is SystemBundle, which the
// caller gives (nil: none, so the labelled ConfigMaps hold the user bundle alone; the
// rehearsal passes none, as no system CA signs anything a rehearsal dials).
type TrustedCAInjector struct {
	Kube *kube.Clients
	// SystemBundle stands for the CNO container's system bundle (PEM), appended after the
	// Proxy's trustedCA as mergeTrustBundlesToConfigMap does; nil: none.
	SystemBundle []byte
}

// TrustedCALabel is the label that asks the CNO for the trusted CA bundle
// (names.TRUSTED_CA_BUNDLE_CONFIGMAP_LABEL), and TrustedCAKey the key it fills
// (names.TRUSTED_CA_BUNDLE_CONFIGMAP_KEY).
const (
	TrustedCALabel = "config.openshift.io/inject-trusted-cabundle"
	TrustedCAKey   = "ca-bundle.crt"
)

var proxyGVR = kube.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "proxies"}

// Inject is one pass of both controllers. It returns the namespace/name of every labelled
// ConfigMap it changed. No Proxy `cluster` is no work (proxyconfig: "proxy not found;
// reconciliation will be skipped"); a trustedCA ConfigMap that is missing or holds no
// certificate is an error, and nothing is written (proxyconfig: InvalidProxyConfig).
func (in *TrustedCAInjector) Inject(ctx context.Context) ([]string, error) {
	px, err := in.Kube.Dynamic.Resource(proxyGVR).Get(ctx, "cluster", kube.GetOptions{})
	if kube.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cno stand-in: proxy cluster: %w", err)
	}
	bundle := in.SystemBundle
	if name, _ := dig(px.Object, "spec", "trustedCA", "name").(string); name != "" {
		// validateConfigMapRef: openshift-config (ADDL_TRUST_BUNDLE_CONFIGMAP_NS), unless the
		// name is trusted-ca-bundle, which is openshift-config-managed's.
		ns := "openshift-config"
		if name == "trusted-ca-bundle" {
			ns = "openshift-config-managed"
		}
		cm, err := in.Kube.Dynamic.Resource(kube.ConfigMaps).Namespace(ns).Get(ctx, name, kube.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("cno stand-in: failed to get trustedCA configmap for proxy cluster: %w", err)
		}
		user, _ := dig(cm.Object, "data", TrustedCAKey).(string)
		if err := checkPEMBundle([]byte(user)); err != nil {
			return nil, fmt.Errorf("cno stand-in: failed to validate trust bundle for proxy trustedCA %q: %w", name, err)
		}
		bundle = []byte(user)
		if len(in.SystemBundle) > 0 {
			bundle = append(append(bundle, '\n'), in.SystemBundle...)
		}
	}
	list, err := in.Kube.Dynamic.Resource(kube.ConfigMaps).Namespace("").List(ctx, kube.ListOptions{LabelSelector: TrustedCALabel + "=true"})
	if err != nil {
		return nil, fmt.Errorf("cno stand-in: list labelled configmaps: %w", err)
	}
	var changed []string
	for i := range list.Items {
		cm := &list.Items[i]
		if have, ok := dig(cm.Object, "data", TrustedCAKey).(string); ok && have == string(bundle) {
			continue // configmap_ca_injector: "unchanged, skipping"
		}
		data, _ := cm.Object["data"].(map[string]any)
		if data == nil {
			data = map[string]any{}
		}
		data[TrustedCAKey] = string(bundle)
		cm.Object["data"] = data
		if _, err := in.Kube.Dynamic.Resource(kube.ConfigMaps).Namespace(cm.GetNamespace()).Update(ctx, cm, kube.UpdateOptions{}); err != nil {
			return changed, fmt.Errorf("cno stand-in: configmap %s/%s: %w", cm.GetNamespace(), cm.GetName(), err)
		}
		changed = append(changed, cm.GetNamespace()+"/"+cm.GetName())
	}
	slices.Sort(changed)
	return changed, nil
}

// checkPEMBundle is validation.TrustBundleConfigMap's check: one or more PEM certificates,
// each parsing.
func checkPEMBundle(b []byte) error {
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return errors.New("data does not contain any valid RSA or ECDSA certificates")
	}
	return nil
}
