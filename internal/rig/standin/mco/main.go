// Command mco-standin is a STAND-IN for the OpenShift machine-config-operator and
// machine-config-controller binaries of one release (4.18, 4.20 or 4.22, OCP or OKD: fixed when
// it is built, release.go), for tests and the sample payload (there is no real MCO binary
// outside a real release). It is not the MCO.
//
// It honours the two bootstrap command lines labbuild runs (../shared/spec/mco-bootstrap.md,
// MCO cmd/machine-config-operator/bootstrap.go and cmd/machine-config-controller/bootstrap.go of
// the release's branch): the same flags, the same required inputs (failing like the real one
// when one is missing) and the same output layout, and it writes what the real programs write,
// byte for byte (TestMatchesRealMCO, against ../shared/fixtures/mco-real): the operator's
// bootstrap manifests (operator_text.go, bootstrap_onprem.go), and the controller's render of
// the REAL templates tree (--templates, default /etc/mcc/templates, templates.go), the
// generated MachineConfigs of the bootstrap (99-<pool>-generated-registries in registries.go;
// 97/98-<pool>-generated-kubelet and the 4.20 ones in kubelet.go), merged and named as the
// render controller does (controller.go), encoded as the release's serializers do (encode.go).
//
// What it does not render it refuses by name rather than render something else: KubeletConfig
// and ContainerRuntimeConfig objects, a non-default Node config, ClusterImagePolicy/ImagePolicy,
// an Image's registrySources, a TLS profile other than Intermediate, a cloud provider config,
// and input fields its openshift/api types (4.18) do not know.
//
// Invocation: as machine-config-operator or machine-config-controller (argv[0] basename, e.g.
// through a symlink or a copy), or with that name as the first argument:
//
//	mco-standin machine-config-operator bootstrap --root-ca=... --dest-dir=...
//	mco-standin machine-config-controller bootstrap --manifest-dir=... --dest-dir=...
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	os.Exit(dispatch(os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch picks the emulated program from argv0's base name or, failing that, the first
// argument, and runs it. It returns the exit status.
func dispatch(argv0 string, args []string, stdout, stderr io.Writer) int {
	prog := filepath.Base(argv0)
	if prog != "machine-config-operator" && prog != "machine-config-controller" {
		if len(args) == 0 {
			fmt.Fprintln(stderr, "mco-standin: usage: mco-standin machine-config-operator|machine-config-controller bootstrap [flags]")
			return 2
		}
		prog, args = args[0], args[1:]
	}
	var err error
	switch prog {
	case "machine-config-operator":
		err = runOperator(args, stdout, stderr)
	case "machine-config-controller":
		err = runController(args, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "mco-standin: unknown program %q (want machine-config-operator or machine-config-controller)\n", prog)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "F %s: %v\n", prog, err)
		return 255 // klog.Fatalf exits 255
	}
	return 0
}

// rootValueFlags are the root (persistent) flags that take a value and may precede the
// subcommand: MCO's --payload-version, --operator-image, the controller's --templates, and
// klog's -v.
var rootValueFlags = map[string]bool{"--payload-version": true, "--operator-image": true, "--templates": true, "-v": true, "--v": true}

// splitSubcommand returns the subcommand (must be "bootstrap") and the remaining flags; root
// persistent flags may come before it.
func splitSubcommand(prog string, args []string) ([]string, error) {
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			if a != "bootstrap" {
				return nil, fmt.Errorf("unknown command %q for %q (the stand-in only implements bootstrap)", a, prog)
			}
			return append(append([]string{}, args[:i]...), args[i+1:]...), nil
		}
		// A root flag given as "--flag value" consumes the next word.
		if !strings.Contains(a, "=") && i+1 < len(args) && rootValueFlags[a] {
			// Join "--flag value" into "--flag=value" so the value is not taken as the command.
			args = append(append([]string{}, args[:i]...), append([]string{a + "=" + args[i+1]}, args[i+2:]...)...)
			return splitSubcommand(prog, args)
		}
	}
	return nil, fmt.Errorf("%s: missing command (the stand-in only implements bootstrap)", prog)
}
