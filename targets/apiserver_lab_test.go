package targets

import (
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/render/manifests"
)

// mfRealAPILab is the lab of a test that runs the real etcd and kube-apiserver: it requires
// both (testenv.RequireAPIServer), carries the payload's 4.18 CRDs (mfFixtureCRDs) and the
// real clock, which the real programs check certificates against.
func mfRealAPILab(t *testing.T) *mfLab {
	t.Helper()
	testenv.RequireAPIServer(t)
	l := newMFLab(t)
	l.crds = mfFixtureCRDs(t)
	l.now = time.Now()
	return l
}

// mfBootstrapAPIArgs starts Debian's etcd with the lab's etcd certificates and returns its
// client URL and the bootstrap kube-apiserver's flags from the generated static pod (paths
// mapped to the lab's files), --etcd-servers pointing at that etcd.
func mfBootstrapAPIArgs(t *testing.T, l *mfLab) (etcdURL string, args []string) {
	t.Helper()
	etcdURL = testenv.StartEtcd(t, testenv.EtcdTLS{
		CA:         l.path("pki/ca/etcd-signer", "tls.crt"),
		ServerCert: l.path("pki/cert/etcd-server", "tls.crt"), ServerKey: l.path("pki/key/etcd-server", "tls.key"),
		PeerCert: l.path("pki/cert/etcd-peer", "tls.crt"), PeerKey: l.path("pki/key/etcd-peer", "tls.key"),
		ClientCert: l.path("pki/cert/etcd-client", "tls.crt"), ClientKey: l.path("pki/key/etcd-client", "tls.key"),
	})
	args = mfPodArgs(t, l, "manifests/bootstrap", "static-pods/"+manifests.KubeAPIServerPodFile, "kube-apiserver")
	for i, a := range args {
		if strings.HasPrefix(a, "--etcd-servers=") {
			args[i] = "--etcd-servers=" + etcdURL
		}
	}
	return etcdURL, args
}
