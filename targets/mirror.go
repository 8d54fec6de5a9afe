package targets

// The mirror family is the lab's local release mirror (docs/mirror.md): a real CNCF
// distribution registry run by labbuild, holding every image of the release payload by digest,
// so that a reinstall downloads nothing and a lab can run disconnected.
//
//	mirror/credentials  the registry's user and generated password (password, htpasswd; 0600,
//	                    sticky, never printed)
//	mirror/registry     the registry on 127.0.0.1 (where labbuild copies), TLS from
//	                    pki/cert/mirror, htpasswd auth; its storage (mirror.storage) is shared by
//	                    every lab of the host and outlives `labbuild destroy` (External)
//	mirror/listener     the same registry on the lab bridge address (network.gateway), where the
//	                    nodes pull: a second process on the same storage, started after
//	                    libvirt/network gives the host that address (External)
//	mirror/release      every image of release/image-references, and the release image, copied
//	                    into the mirror by digest (External: its Probe tells the bytes left)
//
// The family exists only with mirror.enabled: a lab without `mirror:` has none of its targets,
// and every other target keeps its key.

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/daemon"
)

// mirrorReads are the config fields that say where the mirror is: the nodes reach it at
// network.gateway:mirror.port, labbuild at 127.0.0.1:mirror.port.
var mirrorReads = []string{lab.MirrorStorage, lab.MirrorPort, lab.NetworkGateway}

// mirrorRegistryReads are mirror/registry's: its storage and port (it serves 127.0.0.1 only).
var mirrorRegistryReads = []string{lab.MirrorStorage, lab.MirrorPort}

// mirrorPKIDeps are the mirror's CA and serving certificate (pki/ca/mirror, pki/cert/mirror).
var mirrorPKIDeps = []string{"pki/ca/mirror-ca", "pki/cert/mirror", "pki/key/mirror"}

// mirrorTargets declares the family for c; destroyStorage is Lab.DestroyMirror (destroy
// --mirror), which mirror/registry's Destroy applies.
func mirrorTargets(c *lab.Config, destroyStorage bool) []*engine.Target {
	if !c.MirrorOn() {
		return nil
	}
	withMirrors := func(reads ...string) []string {
		if len(c.Release.Mirrors) > 0 {
			return append(reads, lab.ReleaseMirrors)
		}
		return reads
	}
	return []*engine.Target{
		{
			Name:    "mirror/credentials",
			Doc:     "the mirror registry's password (password, 0600) and its bcrypt htpasswd (sticky, never printed)",
			Version: 1, Sticky: true,
			Run: mirrorCredentialsRun,
		},
		{
			Name: "mirror/registry",
			Doc:  "the CNCF distribution registry on 127.0.0.1 at mirror.port (where labbuild copies): TLS (mirror CA), htpasswd; storage outlives destroy (--mirror deletes it)",
			Deps: append([]string{"mirror/credentials"}, mirrorPKIDeps...),
			// Reads "release.image" nowhere: the registry does not depend on the release. Nor
			// does it need the lab network: building mirror/release alone (filling the mirror
			// on a host with no lab yet) starts only this. Version 2: the bridge listener moved
			// to mirror/listener; the rebuild stops a version-1 record's bridge process.
			Reads:   mirrorRegistryReads,
			Version: 2, External: true,
			Run: mirrorRegistryRun, Probe: mirrorRegistryProbe,
			Destroy: func(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) {
				return mirrorRegistryDestroy(s, destroyStorage)
			},
		},
		{
			Name: "mirror/listener",
			Doc:  "the mirror registry on the lab bridge (network.gateway:mirror.port), where the nodes pull: a second process on the same storage, started once libvirt/network gives the host that address",
			// libvirt/network makes the bridge and its address (network.gateway): a registry
			// process can bind it only after that, so the dependency orders it; a network made
			// anew (another gateway, a re-created bridge with another record) restarts it.
			// mirror/registry: the same storage, and destroy --mirror (mirror/registry's
			// Destroy) deletes it only after this process stopped (reverse dependency order).
			Deps:    append([]string{"mirror/registry", "mirror/credentials", "libvirt/network"}, mirrorPKIDeps...),
			Reads:   mirrorReads,
			Version: 1, External: true,
			Run: mirrorListenerRun, Probe: mirrorListenerProbe,
			Destroy: func(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) {
				return mirrorRegistryDestroy(s, false)
			},
		},
		{
			Name: "mirror/release",
			Doc:  "every image of the payload's image-references and the release image, by digest, copied into the mirror (existing blobs skipped, verified); -n tells the bytes left",
			Deps: append([]string{"release/resolve", "release/image-references", "mirror/registry", "mirror/credentials"}, mirrorPKIDeps...),
			// The key is the release digest (release/resolve, image-references) plus the
			// mirror's identity (its storage and port): a second lab with the same release
			// and storage finds every image there and copies 0 bytes.
			Reads:   withMirrors(mirrorReads...),
			Files:   []string{lab.AccessPullSecretFile},
			Version: 1, External: true,
			Run: mirrorReleaseRun, Probe: mirrorReleaseProbe,
		},
	}
}

func init() {
	Register(Family{Name: "mirror", Doc: "the local release mirror: a distribution registry holding the payload by digest (mirror.enabled)", Targets: func(l Lab) []*engine.Target { return mirrorTargets(l.Config, l.DestroyMirror) }})
}

// mirrorPasswordBytes is the entropy of the generated password: 24 random bytes, 32 base64url
// characters.
const mirrorPasswordBytes = 24

func mirrorCredentialsRun(ctx context.Context, s *engine.Step) error {
	raw := make([]byte, mirrorPasswordBytes)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	pw := base64.RawURLEncoding.EncodeToString(raw)
	// distribution's htpasswd access controller runs bcrypt on every request, and a copy
	// makes thousands: at the default cost (10, ~70 ms here) that serializes a copy on the
	// CPU. The password is 192 random bits, which no cost factor protects further, so the
	// hash uses bcrypt's minimum cost (4, ~1 ms).
	hash, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		return fmt.Errorf("%s: bcrypt: %w", s.Target().Name, err)
	}
	if err := s.WriteFile("password", []byte(pw), 0o600); err != nil {
		return err
	}
	// The htpasswd format distribution's auth/htpasswd reads: user:bcrypt-hash per line.
	return s.WriteFile("htpasswd", []byte(MirrorUser+":"+string(hash)+"\n"), 0o600)
}

// mirrorRecord is what mirror/registry (127.0.0.1) or mirror/listener (the bridge address)
// made: its registry process, on the shared storage.
type mirrorRecord struct {
	Storage string `json:"storage"`
	Port    int    `json:"port"`
	// Serving maps the listen address ("127.0.0.1", or the bridge address) to its process.
	// A version-1 mirror/registry record may hold both; its rebuild stops them.
	Serving map[string]daemon.Record `json:"serving"`
}

// mirrorSpec is the registry as the config and its upstream targets declare it.
type mirrorSpec struct {
	storage       string
	port          int
	cert, key, ca string // paths
	htpasswd      string // path
	password      []byte
}

func mirrorSpecOf(s *engine.Step) (mirrorSpec, error) {
	var sp mirrorSpec
	st, err := s.String(lab.MirrorStorage)
	if err != nil {
		return sp, err
	}
	sp.storage = lab.ExpandPath(st, "/")
	if err := s.Value(lab.MirrorPort, &sp.port); err != nil {
		return sp, err
	}
	for _, x := range []struct {
		dst       *string
		dep, file string
	}{{&sp.cert, "pki/cert/mirror", "tls.crt"}, {&sp.key, "pki/key/mirror", "tls.key"}, {&sp.ca, "pki/ca/mirror-ca", "tls.crt"},
		{&sp.htpasswd, "mirror/credentials", "htpasswd"}} {
		if *x.dst, err = s.DepPath(x.dep, x.file); err != nil {
			return sp, err
		}
	}
	if sp.password, err = s.DepFile("mirror/credentials", "password"); err != nil {
		return sp, err
	}
	return sp, nil
}

// MirrorRegistryEnv names the registry program explicitly (a path). Otherwise Debian's
// docker-registry (distribution v2.8, .ci/install-mirror.sh) is used, or a `registry` (a
// distribution v3 build) found in PATH. docs/mirror.md says why Debian's by default.
const MirrorRegistryEnv = "LABBUILD_REGISTRY"

// mirrorProgram finds the distribution registry binary.
func mirrorProgram() (string, error) {
	if p := os.Getenv(MirrorRegistryEnv); p != "" {
		if !isExecutable(p) {
			return "", fmt.Errorf("$%s=%s is not an executable file", MirrorRegistryEnv, p)
		}
		return p, nil
	}
	for _, n := range []string{"docker-registry", "registry"} {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no distribution registry program: install Debian's docker-registry (bash .ci/install-mirror.sh), or set $" + MirrorRegistryEnv + " to a distribution v3 `registry`")
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// mirrorRegistryConfig renders the registry's config.yml (distribution's configuration
// reference, version 0.1) for one listen address. Only the fields labbuild sets: filesystem
// storage, TLS, htpasswd, no delete.
func mirrorRegistryConfig(sp mirrorSpec, addr string) []byte {
	q := strconv.Quote
	return []byte(`version: 0.1
log:
  level: info
  formatter: text
storage:
  filesystem:
    rootdirectory: ` + q(sp.storage) + `
  delete:
    enabled: false
  cache:
    blobdescriptor: inmemory
http:
  addr: ` + q(net.JoinHostPort(addr, strconv.Itoa(sp.port))) + `
  tls:
    certificate: ` + q(sp.cert) + `
    key: ` + q(sp.key) + `
  headers:
    X-Content-Type-Options: [nosniff]
auth:
  htpasswd:
    realm: labbuild-mirror
    path: ` + q(sp.htpasswd) + `
`)
}

// mirrorLogPath is the log of the registry serving addr:port on storage.
func mirrorLogPath(storage, addr string, port int) string {
	return filepath.Join(storage, "logs", "registry-"+addr+"-"+strconv.Itoa(port)+".log")
}

// mirrorTLS is the client TLS config that trusts only the mirror CA.
func mirrorTLS(caFile string) (*tls.Config, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// mirrorPing checks that a registry answers its API base (/v2/) over TLS with the mirror's
// credentials: 200, as distribution answers an authenticated client.
func mirrorPing(ctx context.Context, tc *tls.Config, hostport string, password []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+hostport+"/v2/", nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(MirrorUser, string(password))
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 2 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET https://%s/v2/: %s", hostport, resp.Status)
	}
	return nil
}

// hostHasAddr reports whether ip is an address of one of the host's interfaces (the lab
// bridge is up), so that the registry can bind it.
func hostHasAddr(ip string) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == ip {
			return true
		}
	}
	return false
}

// mirrorServe stops what prev ran and starts the registry on addr:sp.port for target s,
// returning its record. distribution reads its config and certificate only at start, and
// takes one listen address per process.
func mirrorServe(ctx context.Context, s *engine.Step, sp mirrorSpec, addr string) (mirrorRecord, error) {
	name := s.Target().Name
	prog, err := mirrorProgram()
	if err != nil {
		return mirrorRecord{}, fmt.Errorf("%s: %w", name, err)
	}
	prev, hadPrev, err := readRecord[mirrorRecord](s, recordFile)
	if err != nil {
		return mirrorRecord{}, err
	}
	// What ran before (another port, certificate or storage) stops first: the port is the
	// same.
	if hadPrev {
		for _, d := range prev.Serving {
			if _, err := d.Stop(5 * time.Second); err != nil {
				return mirrorRecord{}, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	if err := os.MkdirAll(sp.storage, 0o755); err != nil {
		return mirrorRecord{}, fmt.Errorf("%s: mirror.storage: %w", name, err)
	}
	tc, err := mirrorTLS(sp.ca)
	if err != nil {
		return mirrorRecord{}, fmt.Errorf("%s: %w", name, err)
	}
	scratch, err := s.Scratch()
	if err != nil {
		return mirrorRecord{}, err
	}
	// distribution reads its config once, at start: the file need not outlive this run (the
	// certificate, key and htpasswd it names are upstream outputs and stay).
	cfg := filepath.Join(scratch, "config-"+addr+".yml")
	if err := os.WriteFile(cfg, mirrorRegistryConfig(sp, addr), 0o644); err != nil {
		return mirrorRecord{}, err
	}
	hostport := net.JoinHostPort(addr, strconv.Itoa(sp.port))
	d, err := daemon.Start(ctx, daemon.Spec{
		Argv: []string{prog, "serve", cfg},
		// Its log (a pull shows there) lives in the storage, per address and port.
		Log: mirrorLogPath(sp.storage, addr, sp.port),
		// OTEL exporters of distribution v3 are off: no collector runs here.
		Env:     []string{"OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none"},
		Ready:   func(ctx context.Context) error { return mirrorPing(ctx, tc, hostport, sp.password) },
		Timeout: 20 * time.Second,
	})
	if err != nil {
		return mirrorRecord{}, fmt.Errorf("%s: registry on %s: %w", name, hostport, err)
	}
	s.Logf("registry %s pid %d serves https://%s (storage %s)", filepath.Base(prog), d.PID, hostport, sp.storage)
	return mirrorRecord{Storage: sp.storage, Port: sp.port, Serving: map[string]daemon.Record{addr: d}}, nil
}

func mirrorRegistryRun(ctx context.Context, s *engine.Step) error {
	sp, err := mirrorSpecOf(s)
	if err != nil {
		return err
	}
	rec, err := mirrorServe(ctx, s, sp, "127.0.0.1")
	if err != nil {
		return err
	}
	return writeRecord(s, recordFile, rec)
}

// mirrorBridgeWait is how long mirror/listener waits for network.gateway to show on the host
// after libvirt/network started the bridge (libvirt assigns it as the network starts).
const mirrorBridgeWait = 10 * time.Second

func mirrorListenerRun(ctx context.Context, s *engine.Step) error {
	sp, err := mirrorSpecOf(s)
	if err != nil {
		return err
	}
	bridge, err := s.String(lab.NetworkGateway)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(mirrorBridgeWait)
	for !hostHasAddr(bridge) {
		if time.Now().After(deadline) {
			// The nodes could not reach a registry anywhere else: refuse rather than serve
			// 127.0.0.1 only and let every node's pull fail.
			return fmt.Errorf("%s: network.gateway %s is not an address of this host after libvirt/network: the nodes pull from the mirror there, so the registry must run on the host that carries the lab bridge (libvirt.uri); check `ip -br addr` for the bridge", s.Target().Name, bridge)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	rec, err := mirrorServe(ctx, s, sp, bridge)
	if err != nil {
		return err
	}
	return writeRecord(s, recordFile, rec)
}

func mirrorRegistryProbe(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
	return mirrorProcessProbe(s, "")
}

func mirrorListenerProbe(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
	bridge, err := s.String(lab.NetworkGateway)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	return mirrorProcessProbe(s, bridge)
}

// mirrorProcessProbe: Keep while the recorded process runs on its storage (and, for the
// bridge listener, while the host still carries the bridge address it serves), else Create or
// Update with the reason.
func mirrorProcessProbe(s *engine.Step, bridge string) (engine.ProbeResult, error) {
	prev, ok, err := readRecord[mirrorRecord](s, recordFile)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	if !ok || len(prev.Serving) == 0 {
		return engine.ProbeResult{Action: engine.Create, Reason: "the mirror registry is not running"}, nil
	}
	for addr, d := range prev.Serving {
		if !d.Alive() {
			return engine.ProbeResult{Action: engine.Update, Reason: fmt.Sprintf("the registry on %s:%d is not running (pid %d)", addr, prev.Port, d.PID)}, nil
		}
	}
	if bridge != "" {
		if _, ok := prev.Serving[bridge]; !ok {
			return engine.ProbeResult{Action: engine.Update, Reason: fmt.Sprintf("the registry does not serve the bridge address %s", bridge)}, nil
		}
		if !hostHasAddr(bridge) {
			// A socket bound to an address the host lost may never see a connection again
			// (a bridge made anew): start it afresh once libvirt/network is back.
			return engine.ProbeResult{Action: engine.Update, Reason: fmt.Sprintf("the bridge address %s is not on this host", bridge)}, nil
		}
	}
	if _, err := os.Stat(prev.Storage); err != nil {
		return engine.ProbeResult{Action: engine.Update, Reason: fmt.Sprintf("its storage %s is gone", prev.Storage)}, nil
	}
	return engine.ProbeResult{Action: engine.Keep}, nil
}

// mirrorRegistryDestroy stops the registry process (mirror/registry's or mirror/listener's)
// and, with destroyStorage (Lab.DestroyMirror: destroy --mirror, mirror/registry only),
// deletes its storage too; without it the storage, shared by every lab of the host, is kept.
func mirrorRegistryDestroy(s *engine.Step, destroyStorage bool) (engine.DestroyOutcome, error) {
	prev, ok, err := readRecord[mirrorRecord](s, recordFile)
	if err != nil {
		return 0, err
	}
	if !ok {
		return engine.AlreadyAbsent, nil
	}
	existed := false
	for _, d := range prev.Serving {
		e, err := d.Stop(5 * time.Second)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", s.Target().Name, err)
		}
		existed = existed || e
	}
	if destroyStorage && prev.Storage != "" {
		if _, err := os.Stat(prev.Storage); err == nil {
			existed = true
			if err := os.RemoveAll(prev.Storage); err != nil {
				return 0, fmt.Errorf("%s: delete the mirror storage: %w", s.Target().Name, err)
			}
		}
	}
	if !existed {
		return engine.AlreadyAbsent, nil
	}
	return engine.Destroyed, nil
}
