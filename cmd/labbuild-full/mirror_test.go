package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// TestMirrorScripts runs testdata/mirror: the release mirror's registry started by `labbuild
// mirror/registry` (Debian's docker-registry, really started), its storage kept by `labbuild
// destroy` and deleted by `labbuild destroy --mirror`, each said by the plan; bad mirror
// fields exit 2 naming the field.
func TestMirrorScripts(t *testing.T) {
	if _, err := lookRegistry(); err != nil {
		testenv.Missing(t, "docker-registry (bash .ci/install-mirror.sh)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/mirror",
		UpdateScripts: *update,
		Setup: func(e *testscript.Env) error {
			e.Setenv("HOME", e.WorkDir)
			// A script that fails before its destroy leaves the registry running: stop the
			// processes its record names (only registries serving this script's storage).
			e.Defer(func() { stopScriptRegistries(e.WorkDir) })
			// Addresses in 198.18.0.0/24: nothing is sent to them (the bridge is not up, so
			// the registry serves 127.0.0.1 only).
			lab := testenv.LabNetworkYAML + fmt.Sprintf(`nodes:
  - {name: bootstrap, role: bootstrap, ip: 198.18.0.100}
  - {name: master-0, role: master, ip: 198.18.0.101}
  - {name: worker-0, role: worker, ip: 198.18.0.110}
pki: {keyAlgorithm: ECDSA-P256}
mirror:
  enabled: true
  storage: ~/store
  port: %d
`, port)
			return os.WriteFile(filepath.Join(e.WorkDir, "lab.yaml"), []byte(lab), 0o644)
		},
	})
}

// stopScriptRegistries kills the registry processes of the record under workDir whose
// command line names workDir.
func stopScriptRegistries(workDir string) {
	b, err := os.ReadFile(filepath.Join(workDir, "out", "mirror", "registry", "record.json"))
	if err != nil {
		return
	}
	var rec struct {
		Serving map[string]struct {
			PID int `json:"pid"`
		} `json:"serving"`
	}
	if json.Unmarshal(b, &rec) != nil {
		return
	}
	for _, d := range rec.Serving {
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", d.PID))
		if err == nil && strings.Contains(string(cmd), workDir) {
			syscall.Kill(d.PID, syscall.SIGTERM)
		}
	}
}

func lookRegistry() (string, error) {
	if p := os.Getenv("LABBUILD_REGISTRY"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("docker-registry")
	if err != nil {
		return exec.LookPath("registry")
	}
	return p, nil
}
