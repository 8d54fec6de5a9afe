package cache

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFileAtomic: a write creates or replaces the file with the content and mode asked
// for and leaves no temporary file; a write into a missing directory fails and creates
// nothing.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.conf")
	for _, tc := range []struct {
		data string
		mode os.FileMode
	}{{"first\n", 0o644}, {"second, longer\n", 0o600}} {
		if err := WriteFileAtomic(p, []byte(tc.data), tc.mode); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != tc.data {
			t.Errorf("content %q, %v; want %q", b, err, tc.data)
		}
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != tc.mode {
			t.Errorf("mode %v, %v; want %v", st.Mode().Perm(), err, tc.mode)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("directory holds %d entries, want the file alone", len(ents))
		}
	}
	missing := filepath.Join(dir, "no", "f.conf")
	if err := WriteFileAtomic(missing, []byte("x"), 0o644); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	if _, err := os.Stat(filepath.Dir(missing)); !os.IsNotExist(err) {
		t.Errorf("the missing directory exists after the failed write: %v", err)
	}
}
