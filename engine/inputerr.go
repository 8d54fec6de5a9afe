package engine

import (
	"errors"
	"fmt"
	"io/fs"
)

// FieldSource is implemented by Values that know where each config field was set (package
// targets' *Config): messages about a field then name the lab file the user passed (-f
// bad.yaml) and the line, not a generic "lab.yaml".
type FieldSource interface {
	// Where returns where field is set, for messages: "bad.yaml:3", or
	// "the default; bad.yaml does not set it".
	Where(field string) string
	// Source returns the lab file as the user named it: "bad.yaml".
	Source() string
}

// where says where field is set, or "lab.yaml" when the values cannot tell.
func where(v Values, field string) string {
	if fs, ok := v.(FieldSource); ok {
		return fs.Where(field)
	}
	return "lab.yaml"
}

// Where returns where config field is set (FieldSource), for a target's messages: "bad.yaml:3".
func (s *Step) Where(field string) string { return where(s.values, field) }

// ConfigFile returns the lab file as the user named it (-f bad.yaml), for a target's messages
// ("set rhcos.imageURL in bad.yaml"); "lab.yaml" when the values cannot tell.
func (s *Step) ConfigFile() string {
	if fs, ok := s.values.(FieldSource); ok {
		return fs.Source()
	}
	return "lab.yaml"
}

// InputError is a declared input file (Target.Files) that cannot be read. Every target that
// declares the same file fails on it, so a build prints it once ("labbuild: cannot read …") and
// each target's FAILED line refers to it. It names the field, where the field is set and the
// path, never the file's content.
type InputError struct {
	Field string // config field naming the file: "access.pullSecretFile"
	Where string // where the field is set: "bad.yaml:3" (FieldSource)
	Path  string // the resolved path; empty when the field is not set
	Err   error
}

func (e *InputError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s (%s) is not set: set it to a file path", e.Field, e.Where)
	}
	err := e.Err
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is printed once, below
	}
	return fmt.Sprintf("%s (%s) names %s: %v; set %s to an existing, readable file", e.Field, e.Where, e.Path, err, e.Field)
}

func (e *InputError) Unwrap() error { return e.Err }

// rootCause returns the one-line reference a failed target prints instead of its error when
// the cause is shared (an InputError), and whether the cause itself was already printed.
func (b *builder) rootCause(err error) (ref, cause string, first bool) {
	var ie *InputError
	if !errors.As(err, &ie) {
		return "", "", false
	}
	k := ie.Field + "\x00" + ie.Path
	if b.causes == nil {
		b.causes = map[string]bool{}
	}
	first = !b.causes[k]
	b.causes[k] = true
	return "needs " + ie.Field + ", which cannot be read (above)", "cannot read " + ie.Error(), first
}
