package rehearsal

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/labbuild/labbuild/internal/testenv"
)

func TestTryLab(t *testing.T) {
	work := t.TempDir()
	lb := "/tmp/wt12b/labbuild"
	lv := testenv.StartLibvirtd(t)
	lab := newLab(t, lv.URI("qemu:///system"), filepath.Join(lv.Dir, "pool"))
	start := time.Now()
	out, err := labbuildIn(lv.NetNS, lab, lb, "libvirt/network", "haproxy/service", "ignition/bootstrap", "ignition/master-0", "kubeconfig/admin")
	t.Logf("labbuild %s: %v\n%s", time.Since(start), err, out[max(0, len(out)-1500):])
	if err != nil {
		t.FailNow()
	}
	b, _ := os.ReadFile(filepath.Join(lab, "out", "ignition", "bootstrap.ign"))
	root := filepath.Join(work, "b")
	Place(b, root)
	k, _ := ReadKeyfile(root)
	BootStandins(root, k, nil)
	nd, err := StartNode("bootstrap", "lbtry-b", root, filepath.Join(work, "logs"), NodeNet{IP: k.IP, Prefix: k.Prefix, Gateway: k.Gateway, LabNS: lv.NetNS, Bridge: "virbr-rehearsal"})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Stop()
	o, err := exec.Command("nsenter", "-t", fmt.Sprint(nd.holder.Process.Pid), "-m", "-n", "-u", "--", "sh", "-c", "cat /etc/resolv.conf; getent hosts api-int.rehearsal.labbuild.test; getent hosts master-0.rehearsal.labbuild.test; ping -c1 -W1 198.18.0.10").CombinedOutput()
	t.Logf("%s %v", o, err)
	o, _ = lv.Exec("sh", "-c", "ip -4 addr; ps aux | grep -c [h]aproxy")
	t.Logf("%s", o)
}
