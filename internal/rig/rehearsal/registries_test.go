package rehearsal

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPullPlanFor: the registries stand-in reads the node's registries.conf and drop-ins as
// containers/image does (the most specific prefix, drop-ins override, digest-only mirrors only
// for digests), takes the mirror's credentials from CRI-O's global_auth_file and its CA from the
// trust anchors and certs.d, and refuses what containerd cannot do as CRI-O would.
func TestPullPlanFor(t *testing.T) {
	const digest = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	const ca = "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n"
	mcoConf := `unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]
[[registry]]
  prefix = ""
  location = "quay.io/openshift-release-dev/ocp-v4.0-art-dev"
  [[registry.mirror]]
    location = "198.18.0.1:5000/openshift-release-dev/ocp-v4.0-art-dev"
    pull-from-mirror = "digest-only"
[[registry]]
  location = "quay.io/openshift-release-dev"
  [[registry.mirror]]
    location = "other.example.com/elsewhere"
[[registry]]
  location = "blocked.example.com"
  blocked = true
`
	for _, tc := range []struct {
		name, image, dropIn string
		wantHosts           []string // pull sources' hosts, in order
		wantErr             string
	}{
		{name: "digest through the mirror", image: "quay.io/openshift-release-dev/ocp-v4.0-art-dev" + digest,
			wantHosts: []string{"198.18.0.1:5000", "quay.io"}},
		{name: "tag not mirrored", image: "quay.io/openshift-release-dev/ocp-v4.0-art-dev:latest",
			wantHosts: []string{"quay.io"}},
		{name: "unlisted registry", image: "registry.example.com/a/b" + digest, wantHosts: []string{"registry.example.com"}},
		{name: "drop-in overrides the prefix", image: "quay.io/openshift-release-dev/ocp-v4.0-art-dev" + digest,
			dropIn:    "[[registry]]\nlocation = \"quay.io/openshift-release-dev/ocp-v4.0-art-dev\"\nmirror-by-digest-only = true\n[[registry.mirror]]\nlocation = \"m2.example.com:8443/openshift-release-dev/ocp-v4.0-art-dev\"\n",
			wantHosts: []string{"m2.example.com:8443", "quay.io"}},
		{name: "mirror with another path", image: "quay.io/openshift-release-dev/ocp-release" + digest,
			wantErr: "has another repository path"},
		{name: "blocked", image: "blocked.example.com/x" + digest, wantErr: "is blocked on the node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{
				RegistriesConf:                                                 mcoConf,
				CRIODropInDir + "/00-default":                                  "[crio.image]\nglobal_auth_file = \"/var/lib/kubelet/config.json\"\n",
				"/var/lib/kubelet/config.json":                                 `{"auths":{"198.18.0.1:5000":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("labbuild:pw")) + `"}}}`,
				TrustAnchorsDir + "/openshift-config-user-ca-bundle.crt":       ca,
				"/etc/containers/certs.d/m2.example.com:8443/ca.crt":           strings.ReplaceAll(ca, "Q0E=", "TTI="),
				"/etc/containers/certs.d/m2.example.com:8443/client.cert.note": "not a CA",
			}
			if tc.dropIn != "" {
				files[RegistriesConfDir+"/99-test.conf"] = tc.dropIn
			}
			for p, c := range files {
				if err := writeNodeFile(root, p, []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			plan, err := PullPlanFor(root, tc.image)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var hosts []string
			for _, s := range plan.Sources {
				hosts = append(hosts, s.Host)
			}
			if strings.Join(hosts, " ") != strings.Join(tc.wantHosts, " ") {
				t.Fatalf("sources %+v, want hosts %v", plan.Sources, tc.wantHosts)
			}
			toml := string(plan.HostsTOML)
			if !strings.Contains(toml, `server = "https://`+plan.Host+`"`) {
				t.Errorf("hosts.toml has no server for %s:\n%s", plan.Host, toml)
			}
			for _, s := range plan.Sources[:len(plan.Sources)-1] {
				if !strings.Contains(toml, `[host."https://`+s.Host+`"]`) {
					t.Errorf("hosts.toml has no host %s:\n%s", s.Host, toml)
				}
			}
			switch tc.name {
			case "digest through the mirror":
				if !strings.Contains(toml, `Authorization = "Basic `+base64.StdEncoding.EncodeToString([]byte("labbuild:pw"))+`"`) {
					t.Errorf("no credentials from the global auth file:\n%s", toml)
				}
				if len(plan.Files) != 1 {
					t.Fatalf("CA files %v", plan.Files)
				}
				for _, b := range plan.Files {
					if string(b) != ca {
						t.Errorf("CA bundle %q, want the anchor", b)
					}
				}
			case "drop-in overrides the prefix":
				if strings.Contains(toml, "Authorization") {
					t.Errorf("credentials sent to a mirror the auth file has none for:\n%s", toml)
				}
				for _, b := range plan.Files {
					if !strings.Contains(string(b), "TTI=") || !strings.Contains(string(b), "Q0E=") {
						t.Errorf("CA bundle %q, want the anchor and certs.d's ca.crt", b)
					}
				}
			}
			if err := plan.Write(root); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(filepath.Join(root, ContainerdHostsDir, plan.Host, "hosts.toml"))
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("hosts.toml: %v, mode %v (want 0600: it may hold credentials)", err, st.Mode().Perm())
			}
		})
	}
}
