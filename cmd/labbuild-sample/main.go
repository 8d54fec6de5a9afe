// Command labbuild-sample writes a sample lab that builds offline: an OCI image layout holding a
// small OpenShift 4.18 release payload (internal/rig/payload: real CRDs and templates, stand-in
// programs), a pull secret and SSH key made for the sample, and a lab.yaml whose release.image
// is pinned by digest and whose release.mirrors send every pull to the layout.
//
//	labbuild-sample -out out/sample && labbuild -f out/sample/lab.yaml
//
// It is what `make run` calls. It must run from the labbuild repository (it builds
// ./internal/rig/standin/mco, the MCO stand-in, into the payload's machine-config-operator image). The
// real CRDs come from ../shared/fixtures when present, else from the github.com/openshift/api
// module (fetched through the Go module proxy).
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/labbuild/labbuild/internal/rig/payload"
	"github.com/labbuild/labbuild/internal/rig/repo"
)

func main() {
	out := flag.String("out", "out/sample", "directory to write the sample lab into")
	shared := flag.String("shared", repo.Shared(), "the ../shared reference tree with fixtures (\"\" uses the openshift/api module's CRDs and stand-in templates)")
	flag.Parse()
	if err := run(context.Background(), *out, *shared); err != nil {
		fmt.Fprintln(os.Stderr, "labbuild-sample:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out, shared string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	root := repo.Root()
	if root == "" {
		return fmt.Errorf("run me inside the labbuild repository (I build ./internal/rig/standin/mco)")
	}
	bin, err := payload.BuildStandin(ctx, root)
	if err != nil {
		return err
	}
	p, err := payload.Build(payload.Options{Shared: shared, MCOBinary: bin})
	if err != nil {
		return err
	}
	layoutDir := filepath.Join(abs, "payload")
	if err := p.WriteLayout(layoutDir); err != nil {
		return err
	}
	// The sample's pull secret only has to be well formed: the mirrors are on disk. It is a
	// fixed, public sample value, not a credential.
	ps := fmt.Sprintf(`{"auths":{"registry.labbuild.invalid":{"auth":%q,"email":"sample@labbuild.invalid"}}}`+"\n",
		base64.StdEncoding.EncodeToString([]byte("sample:not-a-secret")))
	if err := os.WriteFile(filepath.Join(abs, "pull-secret.json"), []byte(ps), 0o600); err != nil {
		return err
	}
	// A deterministic sample key: the private half is never written and cannot log in anywhere
	// it was not installed by this sample.
	seed := sha256.Sum256([]byte("labbuild sample ssh key"))
	pub, err := ssh.NewPublicKey(ed25519.NewKeyFromSeed(seed[:]).Public())
	if err != nil {
		return err
	}
	authorized := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))) + " labbuild-sample\n"
	if err := os.WriteFile(filepath.Join(abs, "id_ed25519.pub"), []byte(authorized), 0o644); err != nil {
		return err
	}
	lab := fmt.Sprintf(`# Written by labbuild-sample. Fields not set here take labbuild's defaults (labbuild init
# shows them all). The release payload is labbuild's SAMPLE (real CRDs and MCO templates,
# stand-in programs): it builds every file artifact offline but cannot boot a cluster.
release:
  image: %s
  version: %s
  mirrors:                   # every pull by digest goes to the OCI layout written beside this file
    %s: oci:%s
    %s: oci:%s
access:
  pullSecretFile: pull-secret.json   # a sample value, not a credential
  sshKeyFile: id_ed25519.pub
`, p.ReleaseRef(), p.Version, p.ReleaseRepo, layoutDir, p.ComponentRepo, layoutDir)
	if err := os.WriteFile(filepath.Join(abs, "lab.yaml"), []byte(lab), 0o644); err != nil {
		return err
	}
	src := "the openshift/api module"
	if shared != "" {
		src = shared + "/fixtures"
	}
	fmt.Printf("wrote %s/lab.yaml and the payload %s (%d CRD files from %s)\n", out, p.ReleaseRef(), len(p.CRDFiles), src)
	return nil
}
