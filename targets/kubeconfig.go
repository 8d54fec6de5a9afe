package targets

import (
	"context"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/kubeconfig"
)

// The kubeconfig family: openshift-the-hard-way stage 06 (../shared/spec/stages.md §6). Each
// kubeconfig/<name> writes `kubeconfig` (0600: it embeds a private key). Its CA data is the
// Kubernetes CA, which signs the bootstrap kube-apiserver's serving cert that every one of
// these URLs reaches (api and api-int through the load balancer, localhost directly), followed
// by the kube-apiserver-operator's serving signers (pkiServingSigners: lb, localhost,
// service-network), which sign what the same URLs serve after the pivot. The installer's
// kubeconfigs carry kube-apiserver-complete-server-ca-bundle, the same three signers
// (../shared/spec/installer-reference/kubeconfigs.md); labbuild's also keep the bootstrap CA.

// kcSpec is one kubeconfig: the cert it embeds, the user and cluster entry names, and where
// the server is: "api", "api-int" or "localhost".
type kcSpec struct {
	name, cert, user, cluster, server, doc string
}

// kcSpecs is the stage 06 table. cluster "" means the cluster name from cluster.name.
var kcSpecs = []kcSpec{
	{"admin", "admin", "admin", "", "api", "cluster-admin on https://api.<domain>:6443 (the host's oc)"},
	{"localhost", "admin", "admin", "localhost", "localhost", "cluster-admin on https://localhost:6443 (bootkube.sh, the bootstrap CVO)"},
	{"localhost-recovery", "admin", "admin", "localhost-recovery", "localhost", "cluster-admin on localhost, for recovery (parity with OTHW)"},
	{"kube-controller-manager", "kube-controller-manager", "system:kube-controller-manager", "", "api-int", "bootstrap kube-controller-manager"},
	{"kube-scheduler", "kube-scheduler", "system:kube-scheduler", "", "api-int", "bootstrap kube-scheduler"},
	{"kubelet-bootstrap", "kubelet-bootstrap", "system:bootstrapper", "", "api-int", "kubelet --bootstrap-kubeconfig on masters and workers (/etc/kubernetes/kubeconfig)"},
	{"lb-int", "admin", "admin", "lb-int", "api-int", "cluster-admin through the internal load balancer name"},
	{"lb-ext", "admin", "admin", "lb-ext", "api", "cluster-admin through the external load balancer name"},
	{"kube-proxy", "kube-proxy", "system:kube-proxy", "", "api-int", "masters' kube-proxy static pod (/etc/kubernetes/kube-proxy.kubeconfig), long-lived"},
}

// kcCABundle returns the CA bundle every kubeconfig carries: the kubernetes CA, then the
// serving signers in pkiServingSigners order, each read through a declared dependency.
func kcCABundle(s *engine.Step) ([]byte, error) {
	var b []byte
	for _, id := range append([]string{"kubernetes"}, pkiServingSigners...) {
		crt, err := s.DepFile("pki/ca/"+id, "tls.crt")
		if err != nil {
			return nil, err
		}
		b = append(b, crt...)
	}
	return b, nil
}

func kcSignerDeps() []string {
	var d []string
	for _, id := range pkiServingSigners {
		d = append(d, "pki/ca/"+id)
	}
	return d
}

func kubeconfigTargets(c *lab.Config) []*engine.Target {
	var ts []*engine.Target
	for _, k := range kcSpecs {
		k := k
		var reads []string
		if k.server != "localhost" || k.cluster == "" {
			reads = []string{lab.ClusterName}
		}
		if k.server != "localhost" {
			reads = append(reads, lab.ClusterBaseDomain)
		}
		ts = append(ts, &engine.Target{
			Name:    "kubeconfig/" + k.name,
			Doc:     k.doc,
			Deps:    append([]string{"pki/ca/kubernetes", "pki/cert/" + k.cert, "pki/key/" + k.cert}, kcSignerDeps()...),
			Reads:   reads,
			Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error {
				in := kubeconfig.Input{Cluster: k.cluster, User: k.user, Server: "https://localhost:6443"}
				if k.cluster == "" {
					name, err := s.String(lab.ClusterName)
					if err != nil {
						return err
					}
					in.Cluster = name
				}
				if k.server != "localhost" {
					dom, err := clusterDomain(s)
					if err != nil {
						return err
					}
					in.Server = "https://" + k.server + "." + dom + ":6443"
				}
				var err error
				if in.CA, err = kcCABundle(s); err != nil {
					return err
				}
				if in.CertPEM, err = s.DepFile("pki/cert/"+k.cert, "tls.crt"); err != nil {
					return err
				}
				if in.KeyPEM, err = s.DepFile("pki/key/"+k.cert, "tls.key"); err != nil {
					return err
				}
				out, err := kubeconfig.Render(in)
				if err != nil {
					return err
				}
				return s.WriteFile("kubeconfig", out, 0o600)
			},
		})
	}
	return ts
}

func init() {
	Register(Family{Name: "kubeconfig", Doc: "kubeconfigs of the admin and the control-plane identities (stage 06)", Targets: fromConfig(kubeconfigTargets)})
}
