package lab_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets"

	"github.com/rogpeppe/go-internal/txtar"
)

// FuzzConfig feeds lab configs to the parser and the validator (make fuzz). Its seeds are the
// bad-config corpus (testdata/badconfig) and the embedded default. It asserts that neither
// panics; that a refusal is a ConfigError or ConfigErrors, each naming the file and saying
// what is wrong; and that a config both accept declares its targets (Load) without error or
// panic, so that no invalid value reaches a target's declaration.
func FuzzConfig(f *testing.F) {
	corpus, err := filepath.Glob("../testdata/badconfig/*.txtar")
	if err != nil || len(corpus) == 0 {
		f.Fatalf("no seed corpus: %v", err)
	}
	for _, p := range corpus {
		ar, err := txtar.ParseFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range ar.Files {
			if file.Name == "lab.yaml" {
				f.Add(file.Data)
			}
		}
	}
	f.Add(lab.DefaultLabYAML())
	f.Add(lab.DefaultSNOLabYAML())
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := lab.ParseConfig(data, "lab.yaml")
		if err != nil {
			checkConfigErr(t, err)
		}
		if c == nil {
			if err == nil {
				t.Fatal("ParseConfig returned neither a config nor an error")
			}
			return
		}
		verr := c.Validate("lab.yaml")
		if verr != nil {
			checkConfigErr(t, verr)
		}
		if err != nil || verr != nil {
			return
		}
		if _, err := engine.Load(engine.Options{Config: targets.Lab{Config: c}}); err != nil {
			t.Fatalf("a config that validates does not load: %v\n%s", err, data)
		}
	})
}

func checkConfigErr(t *testing.T, err error) {
	t.Helper()
	var ces lab.ConfigErrors
	var ce *lab.ConfigError
	switch {
	case errors.As(err, &ces):
		if len(ces) == 0 {
			t.Fatal("empty ConfigErrors")
		}
		for _, e := range ces {
			checkConfigErr(t, e)
		}
	case errors.As(err, &ce):
		if ce.File != "lab.yaml" || ce.Msg == "" || !strings.HasPrefix(ce.Error(), "lab.yaml") {
			t.Fatalf("ConfigError without file or message: %#v", ce)
		}
	default:
		t.Fatalf("not a ConfigError: %T %v", err, err)
	}
}
