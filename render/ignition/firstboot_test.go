package ignition

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_4/types"

	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// fbFixture returns the real MCO release-4.18 render of the master pool
// (../shared/fixtures/mco-real/4.18/host/base/master, 46 files and 24 units: drop-ins, empty
// drop-ins, kubens.service enabled: false) and a node config built from it by Node.
func fbFixture(t *testing.T) (*RenderedMachineConfig, types.Config) {
	t.Helper()
	shared := testenv.RequireShared(t)
	doc, err := os.ReadFile(filepath.Join(shared, "fixtures/mco-real/4.18/host/base/master/machineconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mc, err := ParseMachineConfig(doc)
	if err != nil {
		t.Fatal(err)
	}
	in := testNode(t, "master-0", "192.168.126.101")
	in.RenderedMachineConfig = doc
	res, err := Node(in)
	if err != nil {
		t.Fatal(err)
	}
	node, err := Parse(res.JSON)
	if err != nil {
		t.Fatal(err)
	}
	return mc, node
}

// fbSetFile replaces the file at p in cfg (a copy of its entry) by contents and mode.
func fbSetFile(t *testing.T, cfg *types.Config, p string, contents []byte, mode *int) {
	t.Helper()
	for i, f := range cfg.Storage.Files {
		if f.Path == p {
			nf := IgnFile(File{Path: p, Contents: contents})
			nf.Mode = mode
			cfg.Storage.Files[i] = nf
			return
		}
	}
	t.Fatalf("no file %s", p)
}

// fbUnit returns a pointer to the unit name of cfg.
func fbUnit(t *testing.T, cfg *types.Config, name string) *types.Unit {
	t.Helper()
	for i := range cfg.Systemd.Units {
		if cfg.Systemd.Units[i].Name == name {
			return &cfg.Systemd.Units[i]
		}
	}
	t.Fatalf("no unit %s", name)
	return nil
}

// fbClone deep-copies a config through its JSON.
func fbClone(t *testing.T, cfg types.Config) types.Config {
	t.Helper()
	raw, err := Encode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFirstBoot runs the daemon's first-boot check on a node built from the real MCO render
// and on nodes changed one entry at a time: what validateOnDiskState refuses is refused with
// its message, and what it does not read (an ignored path, a file the MachineConfig lacks, a
// unit enabled: true left disabled, an empty drop-in absent) passes.
func TestFirstBoot(t *testing.T) {
	mc, node := fbFixture(t)
	ps, err := FileContents(mc.Config, PathPullSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		node func(t *testing.T, n *types.Config) // changes the node
		mc   func(t *testing.T, c *types.Config) // changes the rendered config
		want string                              // "" = accepted
	}{
		{name: "as built", want: ""},
		{name: "pull secret trimmed by one byte", node: func(t *testing.T, n *types.Config) {
			fbSetFile(t, n, PathPullSecret, []byte(strings.TrimSpace(string(ps))), ptr(0o600))
		}, want: `unexpected on-disk state validating against ` + mc.Name + `: content mismatch for file "/var/lib/kubelet/config.json"`},
		{name: "pull secret mode 0644", node: func(t *testing.T, n *types.Config) {
			fbSetFile(t, n, PathPullSecret, ps, nil)
		}, want: `mode mismatch for file: "/var/lib/kubelet/config.json"; expected: -rw-------/384/0600; received: -rw-r--r--/420/0644`},
		{name: "file missing", node: func(t *testing.T, n *types.Config) {
			n.Storage.Files = slices.DeleteFunc(n.Storage.Files, func(f types.File) bool { return f.Path == PathPullSecret })
		}, want: `could not stat file "/var/lib/kubelet/config.json": lstat /var/lib/kubelet/config.json: no such file or directory`},
		{name: "a symlink where a file is", node: func(t *testing.T, n *types.Config) {
			n.Storage.Files = slices.DeleteFunc(n.Storage.Files, func(f types.File) bool { return f.Path == PathPullSecret })
			n.Storage.Links = append(n.Storage.Links, types.Link{Node: types.Node{Path: PathPullSecret}, LinkEmbedded1: types.LinkEmbedded1{Target: ptr("/run/secret.json")}})
		}, want: `mode mismatch for file: "/var/lib/kubelet/config.json"; expected: -rw-------/384/0600; received: Lrwxrwxrwx/`},
		{name: "ignored path differs (kubelet-ca.crt)", node: func(t *testing.T, n *types.Config) {
			fbSetFile(t, n, PathKubeletCA, []byte("other CA"), ptr(0o600))
		}, want: ""},
		{name: "a file the MachineConfig lacks", node: func(t *testing.T, n *types.Config) {
			n.Storage.Files = append(n.Storage.Files, IgnFile(File{Path: "/etc/labbuild-extra", Mode: 0o600, Contents: []byte("x")}))
		}, want: ""},
		{name: "file without mode in the MachineConfig, 0644 on disk", mc: func(t *testing.T, c *types.Config) {
			f := IgnFile(File{Path: "/etc/kubernetes/labbuild-nomode", Contents: []byte("x")})
			f.Mode = nil
			c.Storage.Files = append(c.Storage.Files, f)
		}, node: func(t *testing.T, n *types.Config) {
			n.Storage.Files = append(n.Storage.Files, IgnFile(File{Path: "/etc/kubernetes/labbuild-nomode", Mode: 0o644, Contents: []byte("x")}))
		}, want: ""},
		{name: "file without mode in the MachineConfig, 0600 on disk", mc: func(t *testing.T, c *types.Config) {
			f := IgnFile(File{Path: "/etc/kubernetes/labbuild-nomode", Contents: []byte("x")})
			f.Mode = nil
			c.Storage.Files = append(c.Storage.Files, f)
		}, node: func(t *testing.T, n *types.Config) {
			n.Storage.Files = append(n.Storage.Files, IgnFile(File{Path: "/etc/kubernetes/labbuild-nomode", Mode: 0o600, Contents: []byte("x")}))
		}, want: `mode mismatch for file: "/etc/kubernetes/labbuild-nomode"; expected: -rw-r--r--/420/0644; received: -rw-------/384/0600`},
		{name: "append in the MachineConfig", mc: func(t *testing.T, c *types.Config) {
			c.Storage.Files[0].Append = []types.Resource{{Source: ptr("data:,x")}}
		}, want: "found an append section when checking files. Append is not supported"},
		{name: "unit contents differ", node: func(t *testing.T, n *types.Config) {
			u := fbUnit(t, n, "kubelet.service")
			u.Contents = ptr(*u.Contents + "# local\n")
		}, want: `content mismatch for file "/etc/systemd/system/kubelet.service"`},
		{name: "drop-in differs", node: func(t *testing.T, n *types.Config) {
			fbUnit(t, n, "crio.service").Dropins[0].Contents = ptr("[Service]\n")
		}, want: `content mismatch for file "/etc/systemd/system/crio.service.d/01-kubens.conf"`},
		{name: "empty drop-in absent", node: func(t *testing.T, n *types.Config) {
			u := fbUnit(t, n, "crio.service")
			u.Dropins = slices.DeleteFunc(u.Dropins, func(d types.Dropin) bool { return d.Name == "10-mco-default-env.conf" })
		}, want: ""},
		{name: "empty drop-in present with bytes", node: func(t *testing.T, n *types.Config) {
			for i, d := range fbUnit(t, n, "crio.service").Dropins {
				if d.Name == "10-mco-default-env.conf" {
					fbUnit(t, n, "crio.service").Dropins[i].Contents = ptr("[Service]\n")
				}
			}
		}, want: `content mismatch for file "/etc/systemd/system/crio.service.d/10-mco-default-env.conf"`},
		{name: "enabled: false unit enabled", node: func(t *testing.T, n *types.Config) {
			fbUnit(t, n, "kubens.service").Enabled = ptr(true)
		}, want: `unit "kubens.service" expected enabled=false, but systemd reports "enabled"`},
		{name: "enabled: true unit left disabled", node: func(t *testing.T, n *types.Config) {
			fbUnit(t, n, "kubelet.service").Enabled = ptr(false)
		}, want: ""},
		{name: "masked in the MachineConfig, not on disk", mc: func(t *testing.T, c *types.Config) {
			fbUnit(t, c, "kubens.service").Mask = ptr(true)
		}, want: `state validation: invalid unit masked setting. path: "/etc/systemd/system/kubens.service"; expected: /dev/null; received: /etc/systemd/system/kubens.service`},
		{name: "masked on both", mc: func(t *testing.T, c *types.Config) {
			fbUnit(t, c, "kubens.service").Mask = ptr(true)
		}, node: func(t *testing.T, n *types.Config) {
			fbUnit(t, n, "kubens.service").Mask = ptr(true)
		}, want: ""},
		{name: "masked on disk only", node: func(t *testing.T, n *types.Config) {
			fbUnit(t, n, "kubens.service").Mask = ptr(true)
		}, want: `mode mismatch for file: "/etc/systemd/system/kubens.service"; expected: -rw-r--r--/420/0644; received: Lrwxrwxrwx/`},
		{name: "node annotations name another config", node: func(t *testing.T, n *types.Config) {
			fbSetFile(t, n, PathNodeAnnotations, []byte(`{"machineconfiguration.openshift.io/currentConfig":"rendered-master-other"}`), ptr(0o644))
		}, want: `names currentConfig "rendered-master-other", not the rendered config "` + mc.Name + `"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, c := fbClone(t, node), fbClone(t, mc.Config)
			if tc.node != nil {
				tc.node(t, &n)
			}
			if tc.mc != nil {
				tc.mc(t, &c)
			}
			err := FirstBoot(n, &RenderedMachineConfig{Name: mc.Name, Config: c})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
