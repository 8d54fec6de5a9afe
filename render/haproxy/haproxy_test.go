package haproxy

import (
	"bytes"
	"crypto/tls"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/internal/rig/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func labSpec() Spec {
	return Spec{
		APIVIP: "192.168.126.10", IngressVIP: "192.168.126.11", StatsPort: 9000,
		Bootstrap: &Server{"bootstrap", "192.168.126.100"},
		Masters:   []Server{{"master-0", "192.168.126.101"}, {"master-1", "192.168.126.102"}, {"master-2", "192.168.126.103"}},
		Workers:   []Server{{"worker-0", "192.168.126.110"}, {"worker-1", "192.168.126.111"}},
	}
}

func TestGolden(t *testing.T) {
	compact := labSpec()
	compact.Workers = nil
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"pre-pivot.cfg", labSpec()},
		{"post-pivot.cfg", PostPivot(labSpec())},
		{"compact.cfg", compact},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Config(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join("testdata", tc.name)
			if *update {
				os.WriteFile(p, got, 0o644)
			}
			want, err := os.ReadFile(p)
			if err != nil {
				t.Fatalf("%v (go test -update creates it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("differs from %s (go test -update rewrites it):\n%s", p, got)
			}
		})
	}
}

// TestBootstrapPivot: the bootstrap is in the API and MCS backends before the pivot, nowhere
// after; ingress of a compact cluster goes to the masters.
func TestBootstrapPivot(t *testing.T) {
	pre, _ := Config(labSpec())
	post, _ := Config(PostPivot(labSpec()))
	if n := strings.Count(string(pre), "server bootstrap 192.168.126.100:"); n != 2 {
		t.Errorf("pre-pivot lists the bootstrap %d times, want 2 (6443, 22623)", n)
	}
	if strings.Contains(string(post), "bootstrap 192.168.126.100") {
		t.Error("post-pivot config still lists the bootstrap")
	}
	c := labSpec()
	c.Workers = nil
	compact, _ := Config(c)
	if !strings.Contains(string(compact), "server master-0 192.168.126.101:443 check") {
		t.Error("compact cluster: ingress does not go to the masters")
	}
}

// TestValidate: a port outside 1-65535 is refused. The config values' cases (a hostname for a
// backend, no masters, a bad VIP or stats port, a space in a node name) are lab's
// (lab.TestValidateNamesFieldAndFix): Config trusts the validated lab config.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(*Spec)
	}{
		{"frontend port", "port 70000", func(s *Spec) { s.FrontendPorts = Ports{API: 70000, MCS: 22623, HTTP: 80, HTTPS: 443} }},
		{"backend port", "port -1", func(s *Spec) { s.BackendPorts = Ports{API: 6443, MCS: 22623, HTTP: -1, HTTPS: 443} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := labSpec()
			tc.edit(&s)
			if _, err := Config(s); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestHAProxyCheck runs `haproxy -c` on every golden config (the lab's VIPs need not exist for
// a check) and on a broken one, which it must reject.
func TestHAProxyCheck(t *testing.T) {
	bin := testenv.Require(t, "haproxy")
	files, _ := filepath.Glob("testdata/*.cfg")
	if len(files) != 3 {
		t.Fatalf("want 3 golden configs, found %v", files)
	}
	for _, f := range files {
		if out, err := exec.Command(bin, "-c", "-f", f).CombinedOutput(); err != nil {
			t.Errorf("haproxy -c %s: %v\n%s", f, err, out)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.cfg")
	os.WriteFile(bad, []byte("frontend x\n  bind 127.0.0.1:1\n  default_backend missing\n"), 0o644)
	if exec.Command(bin, "-c", "-f", bad).Run() == nil {
		t.Error("haproxy -c accepted a frontend with a missing backend")
	}
}

// TestLiveHAProxy runs haproxy with a rendered config on loopback ports: the API frontend
// proxies TLS to a live backend answering /readyz, and the health check marks a dead backend
// (127.0.0.2, nothing listening) DOWN and the live one UP.
func TestLiveHAProxy(t *testing.T) {
	bin := testenv.Require(t, "haproxy")
	backend := testenv.FreePort(t)
	ln, err := net.Listen("tcp", "127.0.0.1:"+backend)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			io.WriteString(w, "ok")
			return
		}
		http.NotFound(w, r)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.StartTLS()
	defer srv.Close()

	port := func() int { p, _ := strconv.Atoi(testenv.FreePort(t)); return p }
	bp, _ := strconv.Atoi(backend)
	fe := Ports{API: port(), MCS: port(), HTTP: port(), HTTPS: port()}
	stats := port()
	cfg, err := Config(Spec{
		APIVIP: "127.0.0.1", IngressVIP: "127.0.0.1", StatsPort: stats,
		Bootstrap:     &Server{"bootstrap", "127.0.0.2"}, // dead
		Masters:       []Server{{"master-0", "127.0.0.1"}},
		FrontendPorts: fe, BackendPorts: Ports{API: bp, MCS: bp, HTTP: bp, HTTPS: bp},
		CheckIntervalMs: 200,
	})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "haproxy.cfg")
	os.WriteFile(f, cfg, 0o644)
	testenv.StartProcess(t, "haproxy", bin, "-db", "-f", f)

	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	api := fmt.Sprintf("https://127.0.0.1:%d/readyz", fe.API)
	testenv.WaitFor(t, "API through haproxy", 10*time.Second, func() error {
		r, err := client.Get(api)
		if err != nil {
			return err
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		if r.StatusCode != 200 || string(b) != "ok" {
			return fmt.Errorf("status %d body %q", r.StatusCode, b)
		}
		return nil
	})
	testenv.WaitFor(t, "health checks", 10*time.Second, func() error {
		st, err := serverStatus(fmt.Sprintf("http://127.0.0.1:%d/stats;csv", stats), "kubernetes-api-backend")
		if err != nil {
			return err
		}
		if !strings.HasPrefix(st["master-0"], "UP") || !strings.HasPrefix(st["bootstrap"], "DOWN") {
			return fmt.Errorf("statuses %v, want master-0 UP and bootstrap DOWN", st)
		}
		return nil
	})
}

// serverStatus reads haproxy's CSV stats and returns the status of each server of backend.
func serverStatus(url, backend string) (map[string]string, error) {
	r, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	recs, err := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(b, []byte("# ")))).ReadAll()
	if err != nil || len(recs) == 0 {
		return nil, fmt.Errorf("stats csv: %v", err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	out := map[string]string{}
	for _, rec := range recs[1:] {
		if len(rec) > col["status"] && rec[col["pxname"]] == backend && rec[col["svname"]] != "BACKEND" {
			out[rec[col["svname"]]] = rec[col["status"]]
		}
	}
	return out, nil
}
