package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}

// StartProcess runs bin for the test's lifetime, its output in a log file whose tail (4 KB)
// is printed only when the test fails. Callers pass file paths, never key bytes, in args.
func StartProcess(t testing.TB, name, bin string, args ...string) {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 4096 {
				b = b[len(b)-4096:]
			}
			t.Logf("%s log (tail):\n%s", name, b)
		}
		logf.Close()
	})
}

// WaitFor polls ready every 100 ms until it succeeds, failing the test after d. Waiting for a
// real process to come up is the one place tests poll.
func WaitFor(t testing.TB, what string, d time.Duration, ready func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := ready()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %v: %v", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// EtcdTLS names the PEM files of a one-member etcd with mutual TLS on client and peer ports.
// Client* is the identity the readiness check presents (it must chain to CA).
type EtcdTLS struct {
	CA, ServerCert, ServerKey, PeerCert, PeerKey, ClientCert, ClientKey string
}

// StartEtcd starts Debian's etcd (3.4) on two free loopback ports with --client-cert-auth and
// --peer-client-cert-auth, as the bootstrap etcd static pod runs, waits until /health answers
// true to the client identity, and returns the client URL (https://127.0.0.1:<port>). The
// server certificate must carry the IP 127.0.0.1. Skips (fails in CI) without etcd.
func StartEtcd(t testing.TB, c EtcdTLS) string {
	t.Helper()
	etcd := Require(t, "etcd")
	curl, purl := "https://127.0.0.1:"+FreePort(t), "https://127.0.0.1:"+FreePort(t)
	StartProcess(t, "etcd", etcd,
		"--name", "etcd-bootstrap", "--data-dir", t.TempDir(),
		"--listen-client-urls", curl, "--advertise-client-urls", curl,
		"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
		"--initial-cluster", "etcd-bootstrap="+purl, "--initial-cluster-state", "new",
		"--cert-file", c.ServerCert, "--key-file", c.ServerKey, "--trusted-ca-file", c.CA, "--client-cert-auth",
		"--peer-cert-file", c.PeerCert, "--peer-key-file", c.PeerKey, "--peer-trusted-ca-file", c.CA, "--peer-client-cert-auth")
	hc := tlsClient(t, c.CA, c.ClientCert, c.ClientKey)
	WaitFor(t, "etcd", 30*time.Second, func() error {
		resp, err := hc.Get(curl + "/health")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if !strings.Contains(string(b), `"health":"true"`) {
			return fmt.Errorf("etcd /health: %s %.200s", resp.Status, b)
		}
		return nil
	})
	return curl
}

func tlsClient(t testing.TB, caFile, certFile, keyFile string) *http.Client {
	t.Helper()
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("%s: no PEM certificate", caFile)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatalf("client certificate %s: %v", certFile, err) // names the file, not its content
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}}
}

// StartKubeAPIServer starts the kube-apiserver built by .ci/build-kube.sh with args (the flags
// of the bootstrap static pod with paths mapped to local files and --etcd-servers pointing at
// StartEtcd's URL) plus --bind-address and --advertise-address 127.0.0.1 and a free
// --secure-port. admin is a rest.Config with a cluster-admin identity whose Host this
// function sets; it waits until /readyz answers ok to admin (90 s) and returns the base URL.
func StartKubeAPIServer(t testing.TB, args []string, admin *rest.Config) string {
	t.Helper()
	bin := Require(t, "kube-apiserver")
	port := FreePort(t)
	args = append(append([]string{}, args...), "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+port)
	StartProcess(t, "kube-apiserver", bin, args...)
	base := "https://127.0.0.1:" + port
	admin.Host = base
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	WaitFor(t, "kube-apiserver", 90*time.Second, func() error {
		b, err := cs.RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		if err != nil {
			return err
		}
		if string(b) != "ok" {
			return fmt.Errorf("/readyz: %.200s", b)
		}
		return nil
	})
	return base
}

// RequireAPIServer requires what a real control-plane test runs: the kube-apiserver
// (.ci/build-kube.sh, through LABBUILD_TOOLS) and Debian's etcd. It returns their paths.
func RequireAPIServer(t testing.TB) (kubeAPIServer, etcd string) {
	t.Helper()
	return Require(t, "kube-apiserver"), Require(t, "etcd")
}
