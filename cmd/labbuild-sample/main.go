// Command labbuild-sample writes a sample lab that builds offline: an OCI image layout holding a
// small OpenShift release payload of one release (internal/rig/payload: real CRDs, FeatureGates,
// templates and CoreOS streams, stand-in programs), a pull secret (none for OKD, which pulls
// without one) and SSH key made for the sample, and a lab.yaml whose release.image is pinned by
// digest and whose release.mirrors send every pull to the layout.
//
//	labbuild-sample -out out/sample [-release 4.22|4.20|4.18|okd-4.22] && labbuild -f out/sample/lab.yaml
//
// It is what `make run` calls, with the newest release (payload.Newest) by default, as `labbuild
// init` writes a lab for the newest. It must run from the labbuild repository (it builds
// ./internal/rig/standin/mco, the MCO stand-in, for the release into the payload's
// machine-config-operator image). The real data comes from ../shared/fixtures
// (fixtures/versions/<release> for every release but 4.18); without it only 4.18 builds, from
// the github.com/openshift/api module (fetched through the Go module proxy).
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
	shared := flag.String("shared", repo.Shared(), "the ../shared reference tree with fixtures (\"\" uses the openshift/api module's CRDs and stand-in templates: 4.18 only)")
	release := flag.String("release", payload.Newest, "the release to build: "+strings.Join(payload.ReleaseNames(), ", "))
	flag.Parse()
	if err := run(context.Background(), *out, *shared, *release); err != nil {
		fmt.Fprintln(os.Stderr, "labbuild-sample:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out, shared, release string) error {
	rel, err := payload.ReleaseNamed(release)
	if err != nil {
		return err
	}
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
	bin, err := payload.BuildStandin(ctx, root, rel.Name)
	if err != nil {
		return err
	}
	p, err := payload.Build(payload.Options{Release: rel.Name, Shared: shared, MCOBinary: bin})
	if err != nil {
		return err
	}
	layoutDir := filepath.Join(abs, "payload")
	if err := p.WriteLayout(layoutDir); err != nil {
		return err
	}
	// The sample's pull secret only has to be well formed: the mirrors are on disk. It is a
	// fixed, public sample value, not a credential. An OKD lab has none: labbuild uses the fake
	// one OKD documents.
	access := "access:\n"
	psPath := filepath.Join(abs, "pull-secret.json")
	if rel.OKD {
		if err := os.Remove(psPath); err != nil && !os.IsNotExist(err) {
			return err
		}
	} else {
		ps := fmt.Sprintf(`{"auths":{"registry.labbuild.invalid":{"auth":%q,"email":"sample@labbuild.invalid"}}}`+"\n",
			base64.StdEncoding.EncodeToString([]byte("sample:not-a-secret")))
		if err := os.WriteFile(psPath, []byte(ps), 0o600); err != nil {
			return err
		}
		access += "  pullSecretFile: pull-secret.json   # a sample value, not a credential\n"
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
	lab := fmt.Sprintf(`# Written by labbuild-sample -release %s. Fields not set here take labbuild's defaults
# (labbuild init shows them all). The release payload is labbuild's SAMPLE of %s (real CRDs,
# FeatureGates and MCO templates, stand-in programs): it builds every file artifact offline but
# cannot boot a cluster.
release:
  image: %s
  version: %s
  mirrors:                   # every pull by digest goes to the OCI layout written beside this file
    %s: oci:%s
    %s: oci:%s
%s  sshKeyFile: id_ed25519.pub
`, rel.Name, p.Version, p.ReleaseRef(), p.Version, p.ReleaseRepo, layoutDir, p.ComponentRepo, layoutDir, access)
	if err := os.WriteFile(filepath.Join(abs, "lab.yaml"), []byte(lab), 0o644); err != nil {
		return err
	}
	src := "the openshift/api module"
	if shared != "" {
		src = filepath.Join(shared, rel.Dir)
	}
	fmt.Printf("wrote %s/lab.yaml and the %s payload %s (%d CRD files from %s)\n", out, p.Version, p.ReleaseRef(), len(p.CRDFiles), src)
	return nil
}
