package rehearsal

// A STAND-IN for CRI-O's image lookup on a node whose runtime is containerd (docs/rehearsal.md,
// docs/real-and-stand-ins.md). CRI-O pulls through containers/image, which reads the node's
// containers-registries.conf(5) — /etc/containers/registries.conf and
// /etc/containers/registries.conf.d/*.conf — and picks the pull sources of an image there;
// containerd reads none of that: it takes a hosts.toml per registry host
// (/etc/containerd/certs.d/<host>/hosts.toml). PullPlanFor does CRI-O's part with the real
// containers/image v5.29.4 code (the version the MCO 4.18 vendors) on the node's own files, and
// writes the result as containerd's hosts.toml. It reads only what CRI-O reads:
//
//	registries.conf + drop-ins  sysregistriesv2.FindRegistry (the most specific [[registry]]
//	                            prefix), Registry.PullSourcesFromReference (mirrors first; a
//	                            mirror-by-digest-only / pull-from-mirror = "digest-only" mirror
//	                            only for a reference by digest; the source last)
//	trust                       the system trust RHCOS's update-ca-trust extracts from
//	                            /etc/pki/ca-trust/source/anchors (where the MCO writes the
//	                            user-ca-bundle, openshift-config-user-ca-bundle.crt, and the
//	                            installer the bootstrap's), plus containers/image's per-host
//	                            /etc/containers/certs.d/<host>/*.crt and /etc/docker/certs.d
//	                            (docker_client.go dockerCertDir, tlsclientconfig.SetupCertificates)
//	credentials                 CRI-O's global_auth_file (crio.conf [crio.image], from the
//	                            node's /etc/crio/crio.conf.d), per pull source with
//	                            pkg/docker/config GetCredentialsForRef, as newDockerClientFromRef
//	                            asks for each mirror
//
// Where containerd cannot do what CRI-O would, PullPlanFor fails rather than pull otherwise: a
// mirror whose repository path differs from the source's (containerd keeps the repository
// path and changes only the host), and a blocked registry or a source CRI-O must never contact
// (containerd always falls back to the registry itself).

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/pkg/docker/config"
	"github.com/containers/image/v5/pkg/sysregistriesv2"
	"github.com/containers/image/v5/types"
)

// Node paths CRI-O and RHCOS read (containers-registries.conf(5), containers-certs.d(5),
// update-ca-trust(8)), and where the translation goes for containerd (its config_path, the
// rehearsal's containerd configuration).
const (
	RegistriesConf      = "/etc/containers/registries.conf"
	RegistriesConfDir   = "/etc/containers/registries.conf.d"
	CRIODropInDir       = "/etc/crio/crio.conf.d"
	TrustAnchorsDir     = "/etc/pki/ca-trust/source/anchors"
	ContainerdHostsDir  = "/etc/containerd/certs.d"
	containersCertsDir  = "/etc/containers/certs.d"
	dockerCertsDir      = "/etc/docker/certs.d"
	extractedTrustAlias = "trust-extracted.pem"
)

// PullSource is one place the image is pulled from, in order: Host is the registry host
// (host[:port]); Ref the reference there; Mirror whether it is a mirror rather than the source.
type PullSource struct {
	Host, Ref string
	Mirror    bool
}

// PullPlan is how CRI-O would pull Image on the node, and its containerd form.
type PullPlan struct {
	// Image is the reference as named (the upstream name).
	Image string
	// Sources are sysregistriesv2's pull sources, in order.
	Sources []PullSource
	// Host is the image's own registry host: containerd's hosts.toml for it is
	// <ContainerdHostsDir>/<Host>/hosts.toml.
	Host string
	// HostsTOML is that file; it carries each mirror's CA bundle path and, when the global auth
	// file has credentials for it, a Basic Authorization header (so it is written 0600).
	HostsTOML []byte
	// Files are the further node files HostsTOML names (CA bundles), by node path.
	Files map[string][]byte
}

// PullPlanFor returns CRI-O's pull plan for image on the node whose files are under root.
// Errors name the file or the limit of the stand-in.
func PullPlanFor(root, image string) (*PullPlan, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return nil, fmt.Errorf("registries stand-in: %q: %w", image, err)
	}
	sys := &types.SystemContext{
		SystemRegistriesConfPath:    filepath.Join(root, RegistriesConf),
		SystemRegistriesConfDirPath: filepath.Join(root, RegistriesConfDir),
	}
	sysregistriesv2.InvalidateCache()
	reg, err := sysregistriesv2.FindRegistry(sys, named.String())
	if err != nil {
		return nil, fmt.Errorf("registries stand-in: the node's %s: %w", RegistriesConf, err)
	}
	host := reference.Domain(named)
	plan := &PullPlan{Image: image, Host: host, Files: map[string][]byte{}}
	if reg == nil {
		plan.Sources = []PullSource{{Host: host, Ref: named.String()}}
	} else {
		if reg.Blocked {
			return nil, fmt.Errorf("registries stand-in: %s is blocked on the node (registry %q): CRI-O refuses it, and containerd cannot be told to", image, reg.Location)
		}
		srcs, err := reg.PullSourcesFromReference(named)
		if err != nil {
			return nil, fmt.Errorf("registries stand-in: %s: %w", image, err)
		}
		for _, s := range srcs {
			plan.Sources = append(plan.Sources, PullSource{Host: reference.Domain(s.Reference), Ref: s.Reference.String(), Mirror: s.Endpoint.Location != reg.Location})
		}
	}
	authFile, err := globalAuthFile(root)
	if err != nil {
		return nil, err
	}
	anchors, err := trustBundle(root)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	last := plan.Sources[len(plan.Sources)-1]
	if last.Mirror || last.Host != host {
		return nil, fmt.Errorf("registries stand-in: %s must not be pulled from its source %s (blocked or NeverContactSource); containerd always falls back to it", image, host)
	}
	fmt.Fprintf(&b, "# The rehearsal's translation of the node's %s for %s (internal/rig/rehearsal/registries.go).\nserver = %q\n", RegistriesConf, image, "https://"+host)
	for _, s := range plan.Sources[:len(plan.Sources)-1] {
		sn, _ := reference.ParseNormalizedNamed(s.Ref)
		if reference.Path(sn) != reference.Path(named) {
			return nil, fmt.Errorf("registries stand-in: mirror %s of %s has another repository path (%s, not %s); containerd keeps the path and changes only the host", s.Ref, image, reference.Path(sn), reference.Path(named))
		}
		fmt.Fprintf(&b, "\n[host.%s]\n  capabilities = [\"pull\", \"resolve\"]\n", strconv.Quote("https://"+s.Host))
		// CA: the system trust (extracted anchors) plus containers/image's per-host certs.d.
		bundle := append([]byte{}, anchors...)
		for _, dir := range []string{containersCertsDir, dockerCertsDir} {
			crts, _ := filepath.Glob(filepath.Join(root, dir, s.Host, "*.crt"))
			sort.Strings(crts)
			for _, c := range crts {
				pem, err := os.ReadFile(c)
				if err != nil {
					return nil, err
				}
				bundle = append(append(bundle, pem...), '\n')
			}
		}
		if len(bundle) > 0 {
			ca := filepath.Join(ContainerdHostsDir, host, strings.ReplaceAll(s.Host, ":", "_")+"-"+extractedTrustAlias)
			plan.Files[ca] = bundle
			fmt.Fprintf(&b, "  ca = %q\n", ca)
		}
		if authFile != "" {
			auth, err := config.GetCredentialsForRef(&types.SystemContext{AuthFilePath: filepath.Join(root, authFile)}, sn)
			if err != nil {
				return nil, fmt.Errorf("registries stand-in: credentials for %s in %s: %w", s.Host, authFile, err)
			}
			if auth.Username != "" {
				basic := base64.StdEncoding.EncodeToString([]byte(auth.Username + ":" + auth.Password))
				fmt.Fprintf(&b, "  [host.%s.header]\n    Authorization = %q\n", strconv.Quote("https://"+s.Host), "Basic "+basic)
			}
		}
	}
	plan.HostsTOML = b.Bytes()
	return plan, nil
}

// Write puts the plan's hosts.toml (0600: it may hold credentials) and CA bundles under root.
func (p *PullPlan) Write(root string) error {
	for path, data := range p.Files {
		if err := writeNodeFile(root, path, data, 0o644); err != nil {
			return err
		}
	}
	return writeNodeFile(root, filepath.Join(ContainerdHostsDir, p.Host, "hosts.toml"), p.HostsTOML, 0o600)
}

func writeNodeFile(root, path string, data []byte, mode os.FileMode) error {
	p := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, mode)
}

// globalAuthFile is the global_auth_file of CRI-O's [crio.image] table in the node's crio.conf
// drop-ins (the last one setting it wins, as CRI-O merges them in name order); "" when none
// sets it.
func globalAuthFile(root string) (string, error) {
	files, _ := filepath.Glob(filepath.Join(root, CRIODropInDir, "*"))
	sort.Strings(files)
	auth := ""
	for _, f := range files {
		var c struct {
			Crio struct {
				Image struct {
					GlobalAuthFile *string `toml:"global_auth_file"`
				} `toml:"image"`
			} `toml:"crio"`
		}
		if _, err := toml.DecodeFile(f, &c); err != nil {
			return "", fmt.Errorf("registries stand-in: %s: %w", strings.TrimPrefix(f, root), err)
		}
		if c.Crio.Image.GlobalAuthFile != nil {
			auth = *c.Crio.Image.GlobalAuthFile
		}
	}
	return auth, nil
}

// trustBundle is update-ca-trust's extract of the node's anchors (PEM files in
// /etc/pki/ca-trust/source/anchors, in name order): what Go's system pool reads on RHCOS
// (/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem) besides the distribution's CAs.
func trustBundle(root string) ([]byte, error) {
	files, _ := filepath.Glob(filepath.Join(root, TrustAnchorsDir, "*"))
	sort.Strings(files)
	var out []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if bytes.Contains(b, []byte("-----BEGIN CERTIFICATE-----")) {
			out = append(append(out, bytes.TrimSpace(b)...), '\n')
		}
	}
	return out, nil
}
