package manifests

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/labbuild/labbuild/render/pki"
)

// BenchmarkRenderAll renders the default lab's static pods and cluster manifests once per
// iteration (the manifests family's rendering, without file I/O): `go test -bench RenderAll
// -benchmem ./render/manifests`.
func BenchmarkRenderAll(b *testing.B) {
	key, err := pki.GenerateKey(pki.ECDSAP256, rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	crt, _, err := pki.Issue(pki.Spec{CommonName: "etcd-signer", CA: true, Validity: 24 * time.Hour}, key, nil, time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	if err != nil {
		b.Fatal(err)
	}
	check := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	ic := InstallConfig{Name: "ocp4", BaseDomain: "example.com", ClusterNetwork: "10.128.0.0/14", HostPrefix: 23,
		ServiceNetwork: "172.30.0.0/16", MachineNetwork: "192.168.126.0/24", Masters: 3}
	fg := payloadFeatureGates(b, "4.18")
	cvo := cvoTemplate(b, "4.18")
	b.ReportAllocs()
	for b.Loop() {
		for _, f := range []func() ([]byte, error){
			func() ([]byte, error) { return EtcdPod(imgEtcd, "192.168.126.100") },
			func() ([]byte, error) { return KubeAPIServerPod(imgHyperkube, "172.30.0.0/16") },
			func() ([]byte, error) {
				return KubeControllerManagerPod(imgHyperkube, "10.128.0.0/14", 23, "172.30.0.0/16")
			},
			func() ([]byte, error) { return KubeSchedulerPod(imgHyperkube) },
			func() ([]byte, error) { return CVOPodFromPayload(cvo, imgRelease, "self-managed-high-availability") },
			func() ([]byte, error) { return KubeProxyPod(imgKubeProxy, "10.128.0.0/14") },
		} {
			_, err := f()
			check(err)
		}
		_, err := NamespaceFiles()
		check(err)
		_, err = RBACFiles()
		check(err)
		for _, f := range []func() (File, error){
			func() (File, error) { return Infrastructure("ocp4.example.com", "ocp4-x7k2p", 3, 2) },
			func() (File, error) { return NetworkConfig("10.128.0.0/14", 23, "172.30.0.0/16") },
			func() (File, error) { return OperatorNetwork("10.128.0.0/14", 23, "172.30.0.0/16") },
			func() (File, error) { return DNS("ocp4.example.com") },
			func() (File, error) { return Ingress("ocp4.example.com") },
			Proxy,
			func() (File, error) { return Scheduler(2) },
			func() (File, error) {
				return FeatureGateFromPayload(FeatureGateInput{Manifests: fg, Version: "4.18.0", Profile: "self-managed-high-availability", FeatureSet: "Default"})
			},
			func() (File, error) { return ClusterVersion("", "stable-4.18", "8b1c2d3e-4f50-4a61-8b72-93a4b5c6d7e8") },
			func() (File, error) { return ClusterConfigV1(ic) },
			func() (File, error) { return EtcdEndpoints("192.168.126.100") },
			func() (File, error) { return TLSSecret("openshift-etcd", "etcd-signer", crt, key) },
			func() (File, error) { return CABundle("openshift-etcd", "etcd-ca-bundle", crt) },
			func() (File, error) { return KubeadminSecret([]byte(testHash)) },
			func() (File, error) { return CAConfigMap("kube-system", "root-ca", "ca.crt", "", crt) },
			func() (File, error) { return MCSTLSSecret(crt, key) },
			func() (File, error) { return SSHMachineConfig("master", testSSHKey) },
		} {
			_, err := f()
			check(err)
		}
	}
}
