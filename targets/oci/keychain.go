package oci

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// Keychain resolves registry credentials from a pull secret: the docker config JSON
// ({"auths": {"quay.io": {"auth": base64("user:password")}}}) that console.redhat.com hands out
// and that podman, cri-o and oc read. Keys may be a registry ("quay.io", "127.0.0.1:5000") or a
// registry plus a repository path ("quay.io/openshift-release-dev"), as containers-auth.json(5)
// allows; the longest key that prefixes the repository wins. A registry with no entry is pulled
// anonymously.
type Keychain struct {
	entries map[string]authn.AuthConfig // key without scheme or trailing slash
}

// NewKeychain parses a pull secret. The error never quotes the secret; it names the entry (the
// registry) whose auth is malformed.
func NewKeychain(pullSecret []byte) (*Keychain, error) {
	var doc struct {
		Auths map[string]struct {
			Auth     string `json:"auth"`
			Username string `json:"username"`
			Password string `json:"password"`
			Token    string `json:"identitytoken"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(pullSecret, &doc); err != nil {
		// json errors may quote input bytes: report only the kind of failure.
		return nil, fmt.Errorf("pull secret is not docker config JSON ({\"auths\": {...}}): %T", err)
	}
	k := &Keychain{entries: map[string]authn.AuthConfig{}}
	for key, e := range doc.Auths {
		cfg := authn.AuthConfig{Username: e.Username, Password: e.Password, IdentityToken: e.Token}
		if e.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(e.Auth)
			if err != nil {
				return nil, fmt.Errorf("pull secret entry %q: auth is not base64 (it should be base64 of user:password)", key)
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if !ok {
				return nil, fmt.Errorf("pull secret entry %q: auth decodes to no user:password pair", key)
			}
			cfg.Username, cfg.Password = user, pass
		}
		k.entries[normalizeAuthKey(key)] = cfg
	}
	return k, nil
}

// normalizeAuthKey strips a URL scheme and trailing slashes and maps Docker Hub's legacy key,
// as docker's config loader does.
func normalizeAuthKey(k string) string {
	k = strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://")
	k = strings.TrimRight(k, "/")
	if k == "index.docker.io/v1" || k == "registry-1.docker.io" {
		k = "index.docker.io"
	}
	return k
}

// Registries returns the registries and repository prefixes the pull secret has entries for,
// sorted (names only, for error messages; never the credentials).
func (k *Keychain) Registries() []string {
	out := make([]string, 0, len(k.entries))
	for key := range k.entries {
		out = append(out, key)
	}
	sort.Strings(out)
	return out
}

// Has reports whether the pull secret holds an entry that applies to repository repo
// ("quay.io/openshift-release-dev/ocp-release").
func (k *Keychain) Has(repo string) bool {
	_, ok := k.lookup(repo)
	return ok
}

func (k *Keychain) lookup(repo string) (authn.AuthConfig, bool) {
	best, found := "", false
	var cfg authn.AuthConfig
	for key, c := range k.entries {
		if (repo == key || strings.HasPrefix(repo, key+"/")) && len(key) >= len(best) {
			best, cfg, found = key, c, true
		}
	}
	return cfg, found
}

// Resolve implements authn.Keychain: the credentials for the repository or registry target
// names, or anonymous.
func (k *Keychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	if k == nil {
		return authn.Anonymous, nil
	}
	if cfg, ok := k.lookup(target.String()); ok {
		return authn.FromConfig(cfg), nil
	}
	if cfg, ok := k.lookup(target.RegistryStr()); ok {
		return authn.FromConfig(cfg), nil
	}
	return authn.Anonymous, nil
}
