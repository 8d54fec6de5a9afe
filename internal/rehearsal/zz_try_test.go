package rehearsal

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestTryKubelet(t *testing.T) {
	ns := "lbtry-lab"
	exec.Command("ip", "netns", "add", ns).Run()
	defer exec.Command("ip", "netns", "del", ns).Run()
	exec.Command("ip", "-n", ns, "link", "add", "br0", "type", "bridge").Run()
	exec.Command("ip", "-n", ns, "link", "set", "br0", "up").Run()
	work := t.TempDir()
	root := filepath.Join(work, "m0")
	b, _ := os.ReadFile("/tmp/wt12b/lab1/out/ignition/master-0.ign")
	if _, err := Place(b, root); err != nil {
		t.Fatal(err)
	}
	k, _ := ReadKeyfile(root)
	BootStandins(root, k, nil)
	nd, err := StartNode("master-0", "lbtry-m0", root, filepath.Join(work, "logs"), NodeNet{IP: k.IP, Prefix: k.Prefix, Gateway: k.Gateway, LabNS: ns, Bridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Stop()
	ctx := context.Background()
	if err := RunOneshot(ctx, nd, "kubelet-auto-node-size.service"); err != nil {
		t.Fatal(err)
	}
	kl, err := KubeletFromUnit(root, "/root/.cache/labbuild/tools/v1.30.14/kubelet")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%q", kl.Argv)
	if err := OverrideKubeletConf(root, kl.Config); err != nil {
		t.Fatal(err)
	}
	pause := filepath.Join(work, "pause.tar")
	if err := PauseTarball(pause, "/bin/busybox"); err != nil {
		t.Fatal(err)
	}
	WriteEtcdStandin(root)
	st := time.Now()
	if err := StartRuntime(ctx, nd, kl.Endpoint, "10.128.0.0/23", pause); err != nil {
		b, _ := os.ReadFile(filepath.Join(work, "logs", "containerd.log"))
		t.Fatalf("%v\n%s", err, b[max(0, len(b)-3000):])
	}
	t.Logf("runtime up in %s", time.Since(st))
	if _, err := nd.Start("kubelet", nil, nil, kl.Argv...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(40 * time.Second)
	b2, _ := os.ReadFile(filepath.Join(work, "logs", "kubelet.log"))
	t.Logf("%s", b2[max(0, len(b2)-6000):])
}
