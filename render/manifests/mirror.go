package manifests

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// The release mirror's objects, written as openshift-install (release-4.18) writes them for an
// install-config with imageDigestSources and additionalTrustBundle:
//
//	pkg/asset/manifests/imagedigestmirrorset.go     ConvertImageDigestMirrorSet: IDMS "image-digest-mirror"
//	pkg/asset/manifests/additionaltrustbundleconfig.go  ConfigMap openshift-config/user-ca-bundle, key ca-bundle.crt
//	pkg/asset/manifests/proxy.go                    spec.trustedCA.name user-ca-bundle (policy Always)
//	data/data/bootstrap/files/etc/containers/registries.conf.template  the bootstrap's registries.conf
//	pkg/types/installconfig.go                      imageDigestSources, additionalTrustBundle(Policy)

// MirrorSource is one imageDigestSources entry: pulls by digest of Source (a repository) go to
// Mirrors first (openshift-install's types.ImageDigestSource).
type MirrorSource struct {
	Source  string   `json:"source"`
	Mirrors []string `json:"mirrors"`
}

// Manifest file names of the mirror's objects. The IDMS and the ConfigMap keep the
// installer's names behind labbuild's apply-order prefix.
var (
	ImageDigestMirrorSetFile = OrderConfig + "-image-digest-mirror-set.yaml"
	UserCABundleFile         = OrderObjects + "-user-ca-bundle-config.yaml"
)

// UserCABundleName is the ConfigMap openshift-config/user-ca-bundle that the Proxy's trustedCA
// names and the MCO's --additional-trust-bundle-config-file reads.
const UserCABundleName = "user-ca-bundle"

type imageDigestMirrors struct {
	Source  string   `json:"source"`
	Mirrors []string `json:"mirrors"`
}

type idmsSpec struct {
	ImageDigestMirrors []imageDigestMirrors `json:"imageDigestMirrors"`
}

// ImageDigestMirrorSet renders the config.openshift.io/v1 ImageDigestMirrorSet
// "image-digest-mirror" with one imageDigestMirrors entry per source, in order (installer
// ConvertImageDigestMirrorSet; no mirrorSourcePolicy: the source stays a fallback).
func ImageDigestMirrorSet(srcs []MirrorSource) (File, error) {
	if len(srcs) == 0 {
		return File{}, errors.New("image-digest-mirror-set: no sources")
	}
	spec := idmsSpec{}
	for _, s := range srcs {
		if s.Source == "" || len(s.Mirrors) == 0 {
			return File{}, fmt.Errorf("image-digest-mirror-set: source %q with %d mirrors", s.Source, len(s.Mirrors))
		}
		spec.ImageDigestMirrors = append(spec.ImageDigestMirrors, imageDigestMirrors(s))
	}
	return newFile(ImageDigestMirrorSetFile, newConfig("ImageDigestMirrorSet", "image-digest-mirror", spec))
}

// UserCABundle renders ConfigMap openshift-config/user-ca-bundle holding bundle (PEM
// certificates, each checked to parse) under ca-bundle.crt, annotated as the installer's
// (openshift.io/owning-component: End User).
func UserCABundle(bundle []byte) (File, error) {
	var out bytes.Buffer
	rest := bytes.TrimSpace(bundle)
	for len(rest) > 0 {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return File{}, errors.New("user-ca-bundle: not a PEM certificate bundle")
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return File{}, fmt.Errorf("user-ca-bundle: %w", err)
		}
		out.Write(pem.EncodeToMemory(b))
		rest = bytes.TrimSpace(rest)
	}
	if out.Len() == 0 {
		return File{}, errors.New("user-ca-bundle: empty bundle")
	}
	cm := newConfigMap("openshift-config", UserCABundleName, map[string]string{"ca-bundle.crt": out.String()})
	cm.Metadata.Annotations = map[string]string{"openshift.io/owning-component": "End User"}
	return newFile(UserCABundleFile, cm)
}

type proxySpec struct {
	TrustedCA struct {
		Name string `json:"name"`
	} `json:"trustedCA"`
}

// ProxyTrustedCA renders the Proxy `cluster` with no proxy and spec.trustedCA.name
// user-ca-bundle: what the installer's proxy.go writes when the install-config has an
// additionalTrustBundle and additionalTrustBundlePolicy Always. The same file name as Proxy.
func ProxyTrustedCA() (File, error) {
	var sp proxySpec
	sp.TrustedCA.Name = UserCABundleName
	return newFile(OrderConfig+"-config-proxy.yaml", newConfig("Proxy", "cluster", sp))
}

// RegistriesConf renders /etc/containers/registries.conf (containers-registries.conf(5) v2)
// as the installer's bootstrap template does: one [[registry]] per source, pulled by digest
// only from its mirrors, TLS verified (insecure = false).
func RegistriesConf(srcs []MirrorSource) []byte {
	var b strings.Builder
	for _, s := range srcs {
		fmt.Fprintf(&b, "[[registry]]\nlocation = %q\ninsecure = false\nmirror-by-digest-only = true\n\n", s.Source)
		for _, m := range s.Mirrors {
			fmt.Fprintf(&b, "[[registry.mirror]]\nlocation = %q\ninsecure = false\n", m)
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

// MergePullSecret returns the docker config JSON ps with an auths entry for registry (host:port)
// holding user:password, replacing one there; every other entry is kept as it was. The result
// is compact JSON with sorted keys. It never puts the credentials in an error.
func MergePullSecret(ps []byte, registry, user, password string) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(ps, &doc); err != nil {
		return nil, errors.New("pull secret: not a JSON object")
	}
	auths := map[string]json.RawMessage{}
	if raw, ok := doc["auths"]; ok {
		if err := json.Unmarshal(raw, &auths); err != nil {
			return nil, errors.New("pull secret: auths is not an object")
		}
	}
	entry, _ := json.Marshal(map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))})
	auths[registry] = entry
	a, _ := json.Marshal(auths)
	doc["auths"] = a
	return json.Marshal(doc)
}
