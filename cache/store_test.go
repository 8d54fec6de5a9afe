package cache

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestPutHashed: an output hashed while written is stored without being read back; a large
// shared file is linked (the same inode), a private or small one copied into a 0600 object;
// and a linked object changed in place through the output reads as a miss, never as the
// wrong bytes.
func TestPutHashed(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), LinkMin/16+1)
	tests := []struct {
		name     string
		data     []byte
		mode     os.FileMode
		linked   bool
		wantMode os.FileMode
	}{
		{"large shared program: linked", big, 0o755, true, 0o755},
		{"large shared file: linked", big, 0o644, true, 0o644},
		{"large private file: copied", big, 0o600, false, 0o600},
		{"small shared file: copied", []byte("kind: ConfigMap\n"), 0o644, false, 0o600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			c := Open(filepath.Join(dir, "cache"))
			out := filepath.Join(dir, "out")
			f, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			w := NewHashingWriter(f)
			if _, _, ok := w.Sum(); ok {
				t.Fatal("Sum ok before Close")
			}
			for p := tt.data; len(p) > 0; p = p[min(len(p), 4096):] { // several writes
				if _, err := w.Write(p[:min(len(p), 4096)]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			d, size, ok := w.Sum()
			if wd, wsize, err := HashFile(out); err != nil || !ok || d != wd || size != wsize || size != int64(len(tt.data)) {
				t.Fatalf("Sum = %s %d %v, HashFile = %s %d %v", d.Short(), size, ok, wd.Short(), wsize, err)
			}
			os.Chmod(out, tt.mode)
			before := Hashed()
			if err := c.PutHashed(out, d, size, tt.mode); err != nil {
				t.Fatal(err)
			}
			if n := Hashed().Bytes - before.Bytes; n != 0 {
				t.Errorf("PutHashed hashed %d bytes, want 0", n)
			}
			if err := c.PutHashed(out, d, size, tt.mode); err != nil { // stored already: nothing to do
				t.Fatal(err)
			}
			ost, err := os.Stat(c.objectPath(d))
			if err != nil {
				t.Fatal(err)
			}
			fst, _ := os.Stat(out)
			if os.SameFile(ost, fst) != tt.linked || ost.Mode().Perm() != tt.wantMode {
				t.Fatalf("object: linked %v mode %o, want linked %v mode %o", os.SameFile(ost, fst), ost.Mode().Perm(), tt.linked, tt.wantMode)
			}
			back := filepath.Join(dir, "restored")
			if err := c.Materialize(d, size, back, tt.mode, dir); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(back); !bytes.Equal(b, tt.data) {
				t.Fatal("restored bytes differ")
			}
			// The output changed in place (same size, as an editor writing through a link does).
			g, err := os.OpenFile(out, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			g.WriteAt([]byte("X"), 3)
			g.Close()
			err = c.Materialize(d, size, back, tt.mode, dir)
			if tt.linked != (err != nil) || err != nil && !errors.Is(err, ErrMiss) {
				t.Fatalf("Materialize after an in-place change: %v (linked %v): want ErrMiss exactly when linked", err, tt.linked)
			}
			if b, _ := os.ReadFile(back); !bytes.Equal(b, tt.data) {
				t.Fatal("a failed Materialize changed the restored file")
			}
			if tt.linked && c.HasObject(d, size) {
				t.Error("the corrupt object is still stored")
			}
		})
	}
}
