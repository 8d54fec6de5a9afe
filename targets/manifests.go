package targets

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
)

// The manifests family: the bootstrap control plane's static pods and the cluster manifests
// applied before the CVO starts (openshift-the-hard-way stage 07, ../shared/spec/stages.md §7
// with the §7.4 fixes; target-graph.md §3.5–3.6). Each static pod and each group of cluster
// objects is its own target, so a config change rebuilds only what reads it; the collector
// manifests/bootstrap gathers them in the layout the bootstrap Ignition copies:
//
//	static-pods/<file>   → /etc/kubernetes/manifests/<file>
//	manifests/<file>     → /opt/openshift/manifests/<file>, applied in name order: the CRDs of
//	                       release/crds (0000_...), then 01 namespaces, 02 config singletons,
//	                       03 RBAC, 04 ConfigMaps and Secrets
//	crio/00-pause.conf   → /etc/crio/crio.conf.d/00-pause.conf
//	resources/<dir>/<f>  → /etc/kubernetes/static-pod-resources/<dir>/<f> (in-cluster VIPs:
//	                       the keepalived and coredns templates of the MCO bootstrap render)
//
// manifests/kube-proxy (kube-proxy.yaml, the masters' static pod) and
// manifests/cluster/bootstrap-complete (applied at pivot) are not in the collector.
// Images come from release/image/<tag> (pullspec) and the CVO's from release/resolve.

// mfOne adapts a renderer of one File.
func mfOne(f manifests.File, err error) ([]manifests.File, error) {
	if err != nil {
		return nil, err
	}
	return []manifests.File{f}, nil
}

// mfCluster declares one manifests/cluster/<name> target writing the files render returns.
func mfCluster(name, doc string, deps, reads []string, render func(s *engine.Step) ([]manifests.File, error)) *engine.Target {
	return &engine.Target{
		Name: "manifests/cluster/" + name, Doc: doc, Deps: deps, Reads: reads, Version: 1,
		Run: func(ctx context.Context, s *engine.Step) error {
			fs, err := render(s)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Target().Name, err)
			}
			return writeManifests(s, fs...)
		},
	}
}

// mfVersion sets t's recipe version to v (bumped when its renderer's output changes).
func mfVersion(v int, t *engine.Target) *engine.Target {
	t.Version = v
	return t
}

// mfStaticPod declares one static pod target writing file.
func mfStaticPod(name, doc, file string, deps, reads []string, render func(s *engine.Step) ([]byte, error)) *engine.Target {
	return &engine.Target{
		Name: name, Doc: doc, Deps: deps, Reads: reads, Version: 1,
		Run: func(ctx context.Context, s *engine.Step) error {
			b, err := render(s)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Target().Name, err)
			}
			return s.WriteFile(file, b, 0o644)
		},
	}
}

// mfClusterNames are the cluster manifest targets the collector gathers, in no particular
// order (the file names order them).
var mfClusterNames = []string{"namespaces", "rbac", "infrastructure", "network-config", "network-operator",
	"dns", "ingress", "proxy", "scheduler", "featuregate", "clusterversion", "support", "cluster-config-v1",
	"etcd-endpoints", "etcd-signer", "pull-secret"}

func manifestsTargets(c *lab.Config) []*engine.Target {
	boot := c.Bootstrap().Name
	var nodeNames []string
	for _, n := range c.Nodes {
		nodeNames = append(nodeNames, n.Name)
	}
	bootIP := lab.NodePath(boot, lab.NodeIP)
	netReads := []string{lab.NetworkClusterNetwork, lab.NetworkHostPrefix, lab.NetworkServiceNetwork}
	netValues := func(s *engine.Step) (cn string, hp int, sn string, err error) {
		if cn, err = s.String(lab.NetworkClusterNetwork); err != nil {
			return
		}
		if hp, err = intValue(s, lab.NetworkHostPrefix); err != nil {
			return
		}
		sn, err = s.String(lab.NetworkServiceNetwork)
		return
	}
	roleReads := roleCountReads(c)
	domainReads := []string{lab.ClusterName, lab.ClusterBaseDomain}

	ts := []*engine.Target{
		mfStaticPod("manifests/static-pods/etcd", "bootstrap etcd static pod (etcd-bootstrap.yaml)", manifests.EtcdPodFile,
			[]string{"release/image/etcd"}, []string{bootIP}, func(s *engine.Step) ([]byte, error) {
				img, err := depPullspec(s, "release/image/etcd")
				if err != nil {
					return nil, err
				}
				ip, err := s.String(bootIP)
				if err != nil {
					return nil, err
				}
				return manifests.EtcdPod(img, ip)
			}),
		// Version 2: the kubelet signer's client and kubelet CAs (issue 24).
		mfVersion(2, mfStaticPod("manifests/static-pods/kube-apiserver", "bootstrap kube-apiserver static pod", manifests.KubeAPIServerPodFile,
			[]string{"release/image/hyperkube"}, []string{lab.NetworkServiceNetwork}, func(s *engine.Step) ([]byte, error) {
				img, err := depPullspec(s, "release/image/hyperkube")
				if err != nil {
					return nil, err
				}
				sn, err := s.String(lab.NetworkServiceNetwork)
				if err != nil {
					return nil, err
				}
				return manifests.KubeAPIServerPod(img, sn)
			})),
		// Version 2: signs kubelet CSRs with the kubelet signer (issue 24).
		mfVersion(2, mfStaticPod("manifests/static-pods/kube-controller-manager", "bootstrap kube-controller-manager static pod", manifests.KubeControllerManagerPodFile,
			[]string{"release/image/hyperkube"}, netReads, func(s *engine.Step) ([]byte, error) {
				img, err := depPullspec(s, "release/image/hyperkube")
				if err != nil {
					return nil, err
				}
				cn, hp, sn, err := netValues(s)
				if err != nil {
					return nil, err
				}
				return manifests.KubeControllerManagerPod(img, cn, hp, sn)
			})),
		mfStaticPod("manifests/static-pods/kube-scheduler", "bootstrap kube-scheduler static pod", manifests.KubeSchedulerPodFile,
			[]string{"release/image/hyperkube"}, nil, func(s *engine.Step) ([]byte, error) {
				img, err := depPullspec(s, "release/image/hyperkube")
				if err != nil {
					return nil, err
				}
				return manifests.KubeSchedulerPod(img)
			}),
		// Version 2: the release's own bootstrap-pod.yaml (issue 37).
		mfVersion(2, mfStaticPod("manifests/static-pods/cvo", "bootstrap cluster-version operator static pod: the release's /bootstrap/bootstrap-pod.yaml (the release image, CLUSTER_PROFILE)", manifests.CVOPodFile,
			[]string{"release/resolve", "release/cvo-bootstrap"}, []string{lab.ClusterProfile}, func(s *engine.Step) ([]byte, error) {
				img, err := depPullspec(s, "release/resolve")
				if err != nil {
					return nil, err
				}
				p, err := s.String(lab.ClusterProfile)
				if err != nil {
					return nil, err
				}
				tmpl, err := s.DepFile("release/cvo-bootstrap", "bootstrap-pod.yaml")
				if err != nil {
					return nil, err
				}
				return manifests.CVOPodFromPayload(tmpl, img, p)
			})),
		mfStaticPod("manifests/kube-proxy", "masters' kube-proxy static pod (kube-proxy.yaml) until OVN-Kubernetes runs", manifests.KubeProxyPodFile,
			[]string{"release/image/kube-proxy"}, []string{lab.NetworkClusterNetwork}, func(s *engine.Step) ([]byte, error) {
				img, err := depPullspec(s, "release/image/kube-proxy")
				if err != nil {
					return nil, err
				}
				cn, err := s.String(lab.NetworkClusterNetwork)
				if err != nil {
					return nil, err
				}
				return manifests.KubeProxyPod(img, cn)
			}),
		mfStaticPod("manifests/crio-pause", "CRI-O drop-in naming the payload's pause image (bootstrap)", "00-pause.conf",
			[]string{"release/image/pod"}, nil, func(s *engine.Step) ([]byte, error) {
				img, err := depPullspec(s, "release/image/pod")
				if err != nil {
					return nil, err
				}
				return manifests.CRIOPauseConf(img)
			}),
		{
			Name:    "manifests/ids",
			Doc:     "the cluster's random identities: infrastructure name and cluster ID (sticky)",
			Reads:   []string{lab.ClusterName},
			Version: 1,
			Sticky:  true,
			Run: func(ctx context.Context, s *engine.Step) error {
				name, err := s.String(lab.ClusterName)
				if err != nil {
					return err
				}
				infra, err := manifests.InfraID(name, rand.Reader)
				if err != nil {
					return err
				}
				id, err := manifests.ClusterID(rand.Reader)
				if err != nil {
					return err
				}
				if err := s.WriteFile("infrastructure-name", []byte(infra+"\n"), 0o644); err != nil {
					return err
				}
				return s.WriteFile("cluster-id", []byte(id+"\n"), 0o644)
			},
		},
		{
			Name:    "manifests/kubeadmin",
			Doc:     "kubeadmin password (kubeadmin-password, 0600) and its bcrypt Secret kube-system/kubeadmin (sticky)",
			Version: 1,
			Sticky:  true,
			Run: func(ctx context.Context, s *engine.Step) error {
				pw, err := manifests.KubeadminPassword(rand.Reader)
				if err != nil {
					return err
				}
				hash, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
				if err != nil {
					return fmt.Errorf("%s: bcrypt: %w", s.Target().Name, err)
				}
				f, err := manifests.KubeadminSecret(hash)
				if err != nil {
					return fmt.Errorf("%s: %w", s.Target().Name, err)
				}
				if err := s.WriteFile("kubeadmin-password", []byte(pw), 0o600); err != nil {
					return err
				}
				return writeManifests(s, f)
			},
		},
		mfCluster("namespaces", "the 10 bootstrap namespaces (openshift-etcd at run-level 0)", nil, nil,
			func(*engine.Step) ([]manifests.File, error) { return manifests.NamespaceFiles() }),
		mfCluster("rbac", "ClusterRoleBindings: system:bootstrapper → node-bootstrapper and node-proxier; system:admin → node-admin", nil, nil,
			func(*engine.Step) ([]manifests.File, error) { return manifests.RBACFiles() }),
		mfCluster("infrastructure", "Infrastructure cluster: platform None (BareMetal with the VIPs in-cluster), API URLs, topologies (spec and status)",
			[]string{"manifests/ids"}, addReads(append(domainReads[:2:2], roleReads...), vipPlatformReads(c)...), func(s *engine.Step) ([]manifests.File, error) {
				dom, err := clusterDomain(s)
				if err != nil {
					return nil, err
				}
				id, err := s.DepFile("manifests/ids", "infrastructure-name")
				if err != nil {
					return nil, err
				}
				m, w, err := roleCounts(s, nodeNames)
				if err != nil {
					return nil, err
				}
				bm, err := vipBareMetal(s)
				if err != nil {
					return nil, err
				}
				return mfOne(manifests.InfrastructureOn(dom, strings.TrimSpace(string(id)), m, w, bm))
			}),
		mfCluster("network-config", "config.openshift.io Network cluster (OVNKubernetes, cluster and service networks)", nil, netReads,
			func(s *engine.Step) ([]manifests.File, error) {
				cn, hp, sn, err := netValues(s)
				if err != nil {
					return nil, err
				}
				return mfOne(manifests.NetworkConfig(cn, hp, sn))
			}),
		mfCluster("network-operator", "operator.openshift.io Network cluster (needed by the network operator)", nil, netReads,
			func(s *engine.Step) ([]manifests.File, error) {
				cn, hp, sn, err := netValues(s)
				if err != nil {
					return nil, err
				}
				return mfOne(manifests.OperatorNetwork(cn, hp, sn))
			}),
		mfCluster("dns", "DNS cluster (baseDomain = the cluster domain)", nil, domainReads, func(s *engine.Step) ([]manifests.File, error) {
			dom, err := clusterDomain(s)
			if err != nil {
				return nil, err
			}
			return mfOne(manifests.DNS(dom))
		}),
		mfCluster("ingress", "Ingress cluster (apps.<domain>)", nil, domainReads, func(s *engine.Step) ([]manifests.File, error) {
			dom, err := clusterDomain(s)
			if err != nil {
				return nil, err
			}
			return mfOne(manifests.Ingress(dom))
		}),
		// With a trust bundle (targets/shared_trust.go) the Proxy names user-ca-bundle, as the
		// installer's proxy.go does for additionalTrustBundlePolicy Always.
		mfCluster("proxy", "Proxy cluster (no proxy)", userCABundleDeps(c), nil, func(*engine.Step) ([]manifests.File, error) {
			if len(userCABundleDeps(c)) > 0 {
				return mfOne(manifests.ProxyTrustedCA())
			}
			return mfOne(manifests.Proxy())
		}),
		mfCluster("scheduler", "Scheduler cluster (masters schedulable without workers)", nil, roleReads, func(s *engine.Step) ([]manifests.File, error) {
			_, w, err := roleCounts(s, nodeNames)
			if err != nil {
				return nil, err
			}
			return mfOne(manifests.Scheduler(w))
		}),
		// Version 2: the status read from the payload's FeatureGate manifests (release/featuregates),
		// with the profile annotation the render adds (issue 37).
		mfVersion(2, mfCluster("featuregate", "FeatureGate cluster with the status the payload's cluster-config-api render computes for the payload version", []string{"release/featuregates"},
			[]string{lab.ClusterFeatureSet, lab.ClusterProfile, lab.ReleaseVersion}, func(s *engine.Step) ([]manifests.File, error) {
				in := manifests.FeatureGateInput{}
				var err error
				for _, v := range []struct {
					p    string
					into *string
				}{{lab.ClusterFeatureSet, &in.FeatureSet}, {lab.ClusterProfile, &in.Profile}, {lab.ReleaseVersion, &in.Version}} {
					if *v.into, err = s.String(v.p); err != nil {
						return nil, err
					}
				}
				if in.Manifests, err = depFiles(s, "release/featuregates", "featuregates/"); err != nil {
					return nil, err
				}
				return mfOne(manifests.FeatureGateFromPayload(in))
			})),
		// Version 2: the release's channel and upstream (issue 37).
		mfVersion(2, mfCluster("clusterversion", "ClusterVersion version (the release's channel and upstream, clusterID; no desiredUpdate)", []string{"manifests/ids"},
			releaseRowReads, func(s *engine.Step) ([]manifests.File, error) {
				row, err := releaseRow(s)
				if err != nil {
					return nil, err
				}
				id, err := s.DepFile("manifests/ids", "cluster-id")
				if err != nil {
					return nil, err
				}
				return mfOne(manifests.ClusterVersion(row.CVOUpstream, row.CVOChannel, strings.TrimSpace(string(id))))
			})),
		mfCluster("support", "OKD: Secret openshift-config/support (scaPullDisabled), as an OKD installer writes; nothing for OpenShift",
			nil, releaseRowReads, func(s *engine.Step) ([]manifests.File, error) {
				row, err := releaseRow(s)
				if err != nil || !row.SupportSecret {
					return nil, err
				}
				return mfOne(manifests.SupportSecret())
			}),
		mfCluster("cluster-config-v1", "ConfigMap kube-system/cluster-config-v1 (the install-config, no pull secret)", append(mirrorClusterDeps(c, mirrorSourceDeps...), trustDeps(c)...),
			addReads(append(append(append(domainReads[:2:2], netReads...), lab.NetworkMachineNetwork), roleReads...), append(vipPlatformReads(c), mirrorClusterReads(c)...)...), func(s *engine.Step) ([]manifests.File, error) {
				ic := manifests.InstallConfig{}
				if err := labInstallConfig(c, s, &ic); err != nil { // targets/mirror.go
					return nil, err
				}
				var err error
				if ic.Name, err = s.String(lab.ClusterName); err != nil {
					return nil, err
				}
				if ic.BaseDomain, err = s.String(lab.ClusterBaseDomain); err != nil {
					return nil, err
				}
				if ic.ClusterNetwork, ic.HostPrefix, ic.ServiceNetwork, err = netValues(s); err != nil {
					return nil, err
				}
				if ic.MachineNetwork, err = s.String(lab.NetworkMachineNetwork); err != nil {
					return nil, err
				}
				if ic.Masters, _, err = roleCounts(s, nodeNames); err != nil {
					return nil, err
				}
				if ic.BareMetal, err = vipBareMetal(s); err != nil {
					return nil, err
				}
				return mfOne(manifests.ClusterConfigV1(ic))
			}),
		mfCluster("etcd-endpoints", "ConfigMap openshift-etcd/etcd-endpoints with the etcd-bootstrap annotation", nil, []string{bootIP},
			func(s *engine.Step) ([]manifests.File, error) {
				ip, err := s.String(bootIP)
				if err != nil {
					return nil, err
				}
				return mfOne(manifests.EtcdEndpoints(ip))
			}),
		mfCluster("etcd-signer", "openshift-etcd signer Secrets and CA bundles (etcd-signer, etcd-metric-signer, etcd-client) so the etcd operator keeps the bootstrap's CA",
			[]string{"pki/ca/etcd-signer", "pki/key/etcd-signer", "pki/ca/etcd-metric-signer", "pki/key/etcd-metric-signer", "pki/cert/etcd-client", "pki/key/etcd-client"}, nil,
			func(s *engine.Step) ([]manifests.File, error) {
				read := func(id, kind, file string) ([]byte, error) { return s.DepFile("pki/"+kind+"/"+id, file) }
				var out []manifests.File
				for _, x := range []struct{ secret, kind, bundle string }{
					{"etcd-signer", "ca", "etcd-ca-bundle"},
					{"etcd-metric-signer", "ca", "etcd-metrics-ca-bundle"},
					{"etcd-client", "cert", ""},
				} {
					crt, err := read(x.secret, x.kind, "tls.crt")
					if err != nil {
						return nil, err
					}
					key, err := read(x.secret, "key", "tls.key")
					if err != nil {
						return nil, err
					}
					f, err := manifests.TLSSecret("openshift-etcd", x.secret, crt, key)
					if err != nil {
						return nil, err
					}
					out = append(out, f)
					if x.bundle != "" {
						b, err := manifests.CABundle("openshift-etcd", x.bundle, crt)
						if err != nil {
							return nil, err
						}
						out = append(out, b)
					}
				}
				return out, nil
			}),
		{
			Name:    "manifests/cluster/pull-secret",
			Doc:     "Secret openshift-config/pull-secret (0600)",
			Deps:    mirrorClusterDeps(c, "mirror/credentials"),
			Reads:   mirrorClusterReads(c),
			Files:   []string{lab.AccessPullSecretFile},
			Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error {
				b, err := s.File(lab.AccessPullSecretFile)
				if err != nil {
					return err
				}
				if err := lab.CheckPullSecret(b, lab.AccessPullSecretFile); err != nil {
					return err
				}
				if b, err = mirrorPullSecret(c, s, bytes.TrimSpace(b)); err != nil {
					return fmt.Errorf("%s: %w", s.Target().Name, err)
				}
				f, err := manifests.PullSecret(bytes.TrimSpace(b))
				if err != nil {
					return fmt.Errorf("%s: %w", s.Target().Name, err)
				}
				return writeManifests(s, f)
			},
		},
		mfCluster("bootstrap-complete", "ConfigMap kube-system/bootstrap status=complete, applied at pivot (not at bootstrap)", nil, nil,
			func(*engine.Step) ([]manifests.File, error) { return mfOne(manifests.BootstrapComplete()) }),
	}

	ts = append(ts, handoverTargets()...) // targets/manifests_handover.go

	collectorDeps := []string{"manifests/static-pods/etcd", "manifests/static-pods/kube-apiserver",
		"manifests/static-pods/kube-controller-manager", "manifests/static-pods/kube-scheduler",
		"manifests/static-pods/cvo", "manifests/crio-pause", "release/crds", "manifests/kubeadmin"}
	for _, n := range append(mfClusterNames[:len(mfClusterNames):len(mfClusterNames)], hoClusterNames...) {
		collectorDeps = append(collectorDeps, "manifests/cluster/"+n)
	}
	inCluster := c.InCluster()
	if inCluster {
		// The bootstrap's on-prem pods from the MCO bootstrap render (targets/shared_vip.go), and
		// the Provisioning CR the installer writes for platform baremetal.
		ts = append(ts, mfCluster("baremetal-provisioning", "Provisioning provisioning-configuration (metal3.io): provisioning network Disabled, virtual media (in-cluster VIPs, platform BareMetal)", nil, nil,
			func(*engine.Step) ([]manifests.File, error) { return mfOne(manifests.BaremetalProvisioning()) }))
		collectorDeps = append(collectorDeps, "mco/operator-bootstrap", "manifests/cluster/baremetal-provisioning")
	}
	if c.MirrorOn() { // targets/mirror.go
		ts = append(ts, mirrorManifestTargets(c)...)
		collectorDeps = append(collectorDeps, "manifests/cluster/mirror")
	}
	if ut := trustManifestTargets(c); len(ut) > 0 { // targets/manifests_trust.go
		ts = append(ts, ut...)
		collectorDeps = append(collectorDeps, userCABundleTarget)
	}
	if c.Baremetal() {
		// The hosts, their BMC Secrets and the worker MachineSet go where the installer puts
		// its 99_openshift-cluster-api_* files; bootkube.sh retries them until the
		// cluster-baremetal-operator's BareMetalHost CRD exists (targets/bmc.go).
		collectorDeps = append(collectorDeps, "bmc/manifests")
	}
	ts = append(ts, &engine.Target{
		Name:    "manifests/bootstrap",
		Doc:     "the bootstrap's manifest tree: static-pods/, manifests/ (CRDs first, in apply order), crio/",
		Deps:    collectorDeps,
		Version: 1,
		Run: func(ctx context.Context, s *engine.Step) error {
			for _, dep := range s.Target().Deps {
				files, err := s.DepFiles(dep)
				if err != nil {
					return err
				}
				for _, rel := range files {
					var dst string
					switch {
					case strings.HasPrefix(dep, "manifests/static-pods/"):
						dst = "static-pods/" + rel
					case dep == "mco/operator-bootstrap": // bootkube.sh copy_static_resources_for
						var ok bool
						if dst, ok = vipBootkubePlace(rel); !ok {
							continue
						}
					case dep == "manifests/crio-pause":
						dst = "crio/" + rel
					case dep == "release/crds":
						if !strings.HasPrefix(rel, "crds/") {
							continue
						}
						dst = "manifests/" + path.Base(rel)
					case strings.HasSuffix(rel, ".yaml"): // cluster manifests; not kubeadmin-password
						dst = "manifests/" + rel
					default:
						continue
					}
					if err := mfCopy(s, dep, rel, dst); err != nil {
						return err
					}
					// The on-prem pods read the install-config as
					// /opt/openshift/manifests/cluster-config.yaml, the installer's name.
					if inCluster && dep == "manifests/cluster/cluster-config-v1" && dst != "manifests/"+vipBootstrapClusterConfig {
						if err := mfCopy(s, dep, rel, "manifests/"+vipBootstrapClusterConfig); err != nil {
							return err
						}
					}
				}
			}
			return nil
		},
	})
	return ts
}

// mfCopy copies output rel of dep to dst, keeping 0600 for secret files.
func mfCopy(s *engine.Step, dep, rel, dst string) error {
	p, err := s.DepPath(dep, rel)
	if err != nil {
		return err
	}
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if st.Mode().Perm()&0o077 == 0 {
		mode = 0o600
	}
	return s.WriteFile(dst, b, mode)
}

func init() {
	Register(Family{Name: "manifests", Doc: "static pods and cluster manifests of the bootstrap control plane (stage 07)",
		Targets: func(l Lab) []*engine.Target {
			return manifestsTargets(l.Config)
		}})
}
