package liveiso_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/internal/rig/isofs"
	"github.com/labbuild/labbuild/targets/liveiso"
)

// The default kernel arguments of an RHCOS 4.18 live ISO (kargs.json "default").
const rhcosKargs = "coreos.liveiso=rhcos-418.94.202501221327-0 ignition.firstboot ignition.platform.id=metal"

// writerAt is a growable in-memory image.
type writerAt struct{ b []byte }

func (w *writerAt) WriteAt(p []byte, off int64) (int, error) { return copy(w.b[off:], p), nil }

// TestKargsQEMU: the ISO's karg areas are read as coreos-installer reads them, rewritten with
// the qemu platform and the serial console at every area, and read back; the rest of the image
// is unchanged.
func TestKargsQEMU(t *testing.T) {
	iso, err := isofs.LiveISO(rhcosKargs, 1139)
	if err != nil {
		t.Fatal(err)
	}
	orig := bytes.Clone(iso)
	k, err := liveiso.ReadKargs(bytes.NewReader(iso))
	if err != nil {
		t.Fatal(err)
	}
	if k.Default != rhcosKargs || k.Current != rhcosKargs || k.Size != 1139 {
		t.Fatalf("ReadKargs = %+v", k)
	}
	q, err := liveiso.QEMUKargs(k.Current)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(rhcosKargs, "platform.id=metal", "platform.id=qemu", 1) + " " + liveiso.SerialConsole; q != want {
		t.Fatalf("QEMUKargs = %q, want %q", q, want)
	}
	w := &writerAt{b: iso}
	if err := k.Write(w, q); err != nil {
		t.Fatal(err)
	}
	k2, err := liveiso.ReadKargs(bytes.NewReader(w.b))
	if err != nil || k2.Current != q || k2.Default != rhcosKargs {
		t.Fatalf("read back: %+v, %v", k2, err)
	}
	changed := 0
	for i := range orig {
		if orig[i] != w.b[i] {
			changed++
		}
	}
	if changed == 0 || changed > 2*1139 {
		t.Errorf("%d bytes changed, want some within the two areas", changed)
	}
	for _, name := range []string{"isolinux/isolinux.cfg", "EFI/redhat/grub.cfg"} {
		f, err := liveiso.Find(bytes.NewReader(w.b), name)
		if err != nil {
			t.Fatal(err)
		}
		if cfg := string(w.b[f.Offset : f.Offset+f.Length]); !strings.Contains(cfg, q+"\n###") {
			t.Errorf("%s does not hold the new arguments:\n%s", name, cfg)
		}
	}
	if err := k.Write(w, strings.Repeat("x", 1139)); err == nil {
		t.Error("arguments longer than the area were written")
	}
}

func TestKargsErrors(t *testing.T) {
	if _, err := liveiso.QEMUKargs("coreos.liveiso=x"); err == nil || !strings.Contains(err.Error(), "0 Ignition platforms") {
		t.Errorf("no platform: %v", err)
	}
	plain, err := isofs.Write(map[string][]byte{"README.TXT": []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := liveiso.ReadKargs(bytes.NewReader(plain)); !errors.Is(err, liveiso.ErrNotFound) {
		t.Errorf("an ISO without kargs.json: %v", err)
	}
	if _, err := liveiso.ReadKargs(bytes.NewReader(make([]byte, 40000))); err == nil || !strings.Contains(err.Error(), "not an ISO 9660") {
		t.Errorf("not an ISO: %v", err)
	}
	if _, err := liveiso.Find(bytes.NewReader(plain), "README.TXT/X"); err == nil {
		t.Error("a file used as a directory was found")
	}
}
