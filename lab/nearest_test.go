package lab

import "testing"

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "log", 3},
		{"graph", "graph", 0},
		{"grpah", "graph", 1}, // a transposition is one edit
		{"lsit", "list", 1},
		{"lsit", "init", 2},
		{"ca", "abc", 3}, // OSA, not full Damerau (which says 2): no edit after a transposition
		{"lst", "list", 1},
		{"clustr", "cluster", 1},
		{"kitten", "sitting", 3},
		{string(make([]byte, 65)), "a", 1 << 20},
	} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := editDistance(c.b, c.a); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d (symmetry)", c.b, c.a, got, c.want)
		}
	}
}

func TestNearest(t *testing.T) {
	verbs := []string{"build", "certs", "clean", "config", "destroy", "graph", "list", "log"}
	for _, c := range []struct {
		w      string
		want   string
		wantOK bool
	}{
		{"grpah", "graph", true},
		{"GRAPH", "graph", true},
		{"lsit", "list", true}, // not init, two substitutions away and first in order
		{"destory", "destroy", true},
		{"cert", "certs", true},
		{"xyzzyplugh", "", false},
		{"", "log", false},
	} {
		got, ok := Nearest(c.w, verbs)
		if ok != c.wantOK || ok && got != c.want {
			t.Errorf("Nearest(%q) = %q, %v; want %q, %v", c.w, got, ok, c.want, c.wantOK)
		}
	}
	if got, ok := Nearest("x", nil); got != "" || ok {
		t.Errorf("Word with no candidates = %q, %v", got, ok)
	}
	// Ties go to the earlier candidate.
	if got, _ := Nearest("cxxxx", []string{"caaaa", "cbbbb"}); got != "caaaa" {
		t.Errorf("tie: got %q, want caaaa", got)
	}
}
