package targets

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/virt"
)

// TestLibvirtRemote builds the family against a second real libvirtd in a namespace of its
// own, reached over qemu+tcp:// as another host: the RHCOS image and each node's Ignition are
// uploaded into its pool (virStorageVolUpload), the disks overlay the uploaded image, fw_cfg
// names the uploaded Ignition volume, a domain starts (QEMU opens both there), and destroy
// removes the domains with their Ignition volumes, the uploaded image and the pool directory.
func TestLibvirtRemote(t *testing.T) {
	d, uri := testenv.StartRemoteLibvirtd(t)
	useNetnsHost(t, d)
	sr := testenv.StartSampleRelease(t, true)
	ctx := context.Background()
	out := t.TempDir()
	c := lvLab(d, sr)
	c.Libvirt.URI = uri
	pool := c.Libvirt.PoolPath
	r, log, err := lvBuild(ctx, Lab{Config: c}, out, false, "libvirt")
	if err != nil {
		t.Fatalf("build over %s: %v\n%s", uri, err, log)
	}
	t.Cleanup(func() { engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out}) })
	if got := lvOwn(r.Built); len(got) != 3+2*len(c.Nodes) {
		t.Errorf("executed %v", got)
	}
	conn, err := virt.Connect(uri)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if !conn.Remote() {
		t.Fatalf("%s not seen as remote", uri)
	}
	for _, n := range c.Nodes {
		dom, _, found, err := conn.Domain("lbt-" + n.Name)
		if err != nil || !found {
			t.Fatalf("domain lbt-%s: found %v, %v", n.Name, found, err)
		}
		var fw []string
		for _, s := range dom.SysInfo {
			if s.FWCfg != nil {
				for _, e := range s.FWCfg.Entry {
					fw = append(fw, e.File)
				}
			}
		}
		wantIgn := filepath.Join(pool, "lbt-"+n.Name+".ign")
		if len(fw) != 1 || fw[0] != wantIgn {
			t.Errorf("%s fw_cfg files %v, want the uploaded volume %s", n.Name, fw, wantIgn)
			continue
		}
		local, err := os.ReadFile(filepath.Join(out, "ignition", n.Name+".ign"))
		if err != nil {
			t.Fatal(err)
		}
		if up, err := os.ReadFile(wantIgn); err != nil || !bytes.Equal(up, local) {
			t.Errorf("%s: uploaded Ignition differs from the built one (%d vs %d bytes, %v)", n.Name, len(up), len(local), err)
		}
		vol, found, err := conn.Volume("lbt", rl.VolumeName("lbt", n.Name))
		if err != nil || !found || vol.BackingStore == nil || !strings.HasPrefix(vol.BackingStore.Path, pool+"/rhcos-") {
			t.Errorf("%s disk: found %v, backing %+v, %v; want the uploaded image in the pool", n.Name, found, vol.BackingStore, err)
		}
	}
	if err := conn.StartDomain("lbt-worker-0", true); err != nil {
		t.Fatalf("start over the uploaded disk and Ignition: %v", err)
	}
	if err := conn.StopDomain("lbt-worker-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out}); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if _, err := os.Stat(filepath.Join(pool, "lbt-"+n.Name+".ign")); err == nil {
			t.Errorf("Ignition volume of %s left after destroy", n.Name)
		}
	}
	// Nothing of the lab stays on the remote host: the uploaded RHCOS image went with the pool,
	// and so did the pool's directory.
	if ents, err := os.ReadDir(pool); !os.IsNotExist(err) {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("pool directory %s after destroy: %v (%v); want it gone with the uploaded image", pool, names, err)
	}
}
