// Package releases holds what labbuild must know about each supported OpenShift release that
// the release payload does not carry: facts of the installer, CVO and MCO code of that release
// branch, one row per release, each field naming its upstream source. Everything else (the
// version, FeatureGates, CRDs, MCO templates and programs, the CVO's bootstrap pod, the CoreOS
// streams, the Ignition spec of the rendered configs) labbuild reads from the payload.
//
// It is data only: no I/O, no OpenShift import. docs/releases.md is this table for people.
//
// Upstream commits the rows were read at (../shared/fixtures/versions/SOURCES.md):
// openshift/api release-4.18 f9b2d1ae, release-4.20 05da40ea, release-4.22 9fda5179;
// cluster-version-operator release-4.18 f72d7e2c, release-4.20 ea3fa769, release-4.22
// 9b55234a; machine-config-operator release-4.18 f313997e, release-4.20 afed0993,
// release-4.22 9027c94c; installer 488926dc (release-4.18), 13a5f6b9 (release-4.20) and main
// 5f2b0d3d for 4.22 (its release-4.22 branch could not be read; each 4.22 installer fact below
// names the commit that introduced it, all before the 2026-04-08 branch point).
package releases

import (
	"fmt"
	"strconv"
	"strings"
)

// Release is one supported release line.
type Release struct {
	// Name is the row's name in docs/releases.md, plans and errors: "4.18", "4.20", "4.22",
	// "okd-4.22".
	Name string
	// Major and Minor are the OpenShift version the payload's release-metadata must have.
	Major, Minor int
	// OKD marks an OKD (SCOS) payload: its MCO is built with TAGS=scos, so its image-references
	// carries stream-coreos instead of rhel-coreos (machine-config-operator release-4.22
	// Dockerfile lines 28-32).
	OKD bool

	// BaseOSTag is the image-references tag of the node OS image the MCO bootstrap looks up
	// (machine-config-operator cmd/machine-config-operator/bootstrap.go runBootstrapCmd,
	// baseOSContainerImageTag: "stream-coreos" in a scos build).
	BaseOSTag string
	// MCORequiredTags are the image-references tags `machine-config-operator bootstrap` dies
	// without (cmd/machine-config-operator/bootstrap.go findImageOrDie; 4.22 adds
	// docker-registry at line 136, MCO commit 51051b82).
	MCORequiredTags []string
	// MCCImageReferences: bootkube.sh copies image-references into the bootstrap controller's
	// --manifest-dir, which decodes its ImageStream (installer main bootkube.sh.template
	// `cp image-references /etc/mcc/bootstrap/image-references`, commit 7b3f1b4c, 2025-11-28;
	// MCO release-4.22 pkg/controller/bootstrap/bootstrap.go `case *imagev1.ImageStream`).
	MCCImageReferences bool

	// MCSCA: the MCO owns the machine-config-server CA, so labbuild hands over the Secret and
	// ConfigMap openshift-machine-config-operator/machine-config-server-ca (installer 13a5f6b9
	// data/data/manifests/bootkube/machine-config-server-ca-{secret,configmap}.yaml.template;
	// MCO release-4.20 pkg/controller/common/constants.go MachineConfigServerCAName,
	// pkg/operator/sync.go getMCSCABundle). MCSTLSSecretTLS: machine-config-server-tls is then a
	// kubernetes.io/tls Secret with the auth.openshift.io certificate annotations (installer
	// 13a5f6b9 machine-config-server-tls-secret.yaml.template, pkg/asset/manifests/operators.go).
	MCSCA, MCSTLSSecretTLS bool

	// StrictVersion: the payload's release-metadata version must be strict semver; the CVO's
	// render refuses anything else (cluster-version-operator release-4.22 pkg/payload/render.go
	// loadReleaseVersion, "cincinnati metadata version %q is not a valid semantic version").
	StrictVersion bool
	// CVOIncludeGates: the CVO passes every manifest through library-go's manifest.Include
	// with the enabled feature gates and the major version, so a CRD gated by
	// release.openshift.io/feature-gate on a disabled gate is never applied
	// (cluster-version-operator release-4.22 pkg/payload/render.go:149; library-go
	// pkg/manifest/manifest.go checkFeatureGates, checkMajorVersion). Before 4.22 the render
	// skipped *NoUpgrade* file names instead, which labbuild's feature-set rule equals.
	CVOIncludeGates bool

	// CVOUpstream and CVOChannel are ClusterVersion spec.upstream and spec.channel ("" upstream:
	// the CVO's default, OpenShift's update service) (installer
	// data/data/manifests/bootkube/cvo-overrides.yaml.template: `stable-<major>.<minor>`, and for
	// SCOS `{{- if .IsSCOS }}` upstream https://amd64.origin.releases.ci.openshift.org/graph,
	// channel stable-scos-4, at 488926dc, 13a5f6b9 and 5f2b0d3d).
	CVOUpstream, CVOChannel string
	// SupportSecret: Secret openshift-config/support with scaPullDisabled "true", so the
	// insights operator does not try to pull Red Hat subscription content (installer
	// data/data/manifests/openshift/90-okd-sca-pull-disable.yaml.template, `{{if .IsOKD}}`).
	SupportSecret bool
	// FakePullSecret is the pull secret used when the lab names none ("" = one is required).
	// OKD's images pull anonymously from quay.io/okd; the installer still requires an auths
	// map, and OKD documents this one (okd-project/okd README.md:33, kcli fake_pull.json:
	// ../shared/fixtures/versions/okd-4.22/configs/fake_pull.kcli.json).
	FakePullSecret string
	// DefaultFeatureSet replaces a cluster.featureSet the lab does not set ("" keeps Default).
	// The installer has no such default (OKD is opt-in and one-way: api release-4.22
	// config/v1/types_feature.go:78 "OKD cannot transition to Default"); issue 37 asks labbuild
	// to make OKD the default of an OKD lab, docs/releases.md says why.
	DefaultFeatureSet string
	// FeatureSets are the feature sets a lab may name with this payload (installer
	// pkg/types/validation/installconfig.go: OKD only for SCOS builds, lines 1617-1619; api
	// config/v1/types_feature.go AllFixedFeatureSets).
	FeatureSets []string
	// DefaultOSImageStream picks the coreos-bootimages data.streams entry the boot image comes
	// from ("" = data.stream alone) (installer main pkg/types/installconfig.go
	// DefaultOSImageStream = rhel-9, commit 9407f69d "MCO-2133", 2026-03-12; SCOS has one
	// stream, pkg/rhcos/stream_scos.go).
	DefaultOSImageStream string
}

// okdFakePullSecret is OKD's documented stand-in pull secret (base64 of "id:pass\n").
const okdFakePullSecret = `{"auths":{"fake":{"auth":"aWQ6cGFzcwo="}}}`

// mcoRequired418 are the tags MCO release-4.18 (and 4.20) bootstrap requires.
var mcoRequired418 = []string{"machine-config-operator", "keepalived-ipfailover", "coredns",
	"baremetal-runtimecfg", "oauth-proxy", "kube-rbac-proxy", "pod", "haproxy-router"}

// mcoRequired422 adds docker-registry (MCO release-4.22 bootstrap.go:136).
var mcoRequired422 = append(append([]string{}, mcoRequired418...), "docker-registry")

var ocpSets = []string{"Default", "TechPreviewNoUpgrade", "DevPreviewNoUpgrade", "CustomNoUpgrade"}

// Supported are the rows, newest first: `labbuild init` writes a lab for Supported[0]'s OCP
// row, Newest.
var Supported = []Release{
	{
		Name: "okd-4.22", Major: 4, Minor: 22, OKD: true,
		BaseOSTag: "stream-coreos", MCORequiredTags: mcoRequired422, MCCImageReferences: true,
		MCSCA: true, MCSTLSSecretTLS: true, StrictVersion: true, CVOIncludeGates: true,
		CVOUpstream: "https://amd64.origin.releases.ci.openshift.org/graph", CVOChannel: "stable-scos-4",
		SupportSecret: true, FakePullSecret: okdFakePullSecret, DefaultFeatureSet: "OKD",
		FeatureSets: append([]string{"OKD"}, ocpSets...),
	},
	{
		Name: "4.22", Major: 4, Minor: 22,
		BaseOSTag: "rhel-coreos", MCORequiredTags: mcoRequired422, MCCImageReferences: true,
		MCSCA: true, MCSTLSSecretTLS: true, StrictVersion: true, CVOIncludeGates: true,
		CVOChannel: "stable-4.22", FeatureSets: ocpSets, DefaultOSImageStream: "rhel-9",
	},
	{
		Name: "4.20", Major: 4, Minor: 20,
		BaseOSTag: "rhel-coreos", MCORequiredTags: mcoRequired418,
		MCSCA: true, MCSTLSSecretTLS: true,
		CVOChannel: "stable-4.20", FeatureSets: ocpSets,
	},
	{
		Name: "4.18", Major: 4, Minor: 18,
		BaseOSTag: "rhel-coreos", MCORequiredTags: mcoRequired418,
		CVOChannel: "stable-4.18", FeatureSets: ocpSets,
	},
}

// Newest is the newest supported OCP release: what `labbuild init` writes and the sample lab
// builds.
const Newest = "4.22"

// Named returns the row called name ("4.22", "okd-4.22").
func Named(name string) (Release, bool) {
	for _, r := range Supported {
		if r.Name == name {
			return r, true
		}
	}
	return Release{}, false
}

// RowName returns the name of the row a payload of version and flavour belongs to
// ("okd-4.22", "4.20"), or "" when version has no major.minor. It does not say whether the
// row is supported (Lookup does).
func RowName(version string, okd bool) string {
	maj, min, ok := majorMinor(version)
	if !ok {
		return ""
	}
	n := fmt.Sprintf("%d.%d", maj, min)
	if okd {
		n = "okd-" + n
	}
	return n
}

// Lookup returns the row of a payload from its release-metadata version and whether its
// image-references carries stream-coreos (OKD). An unsupported release, or a version its row's
// CVO would refuse, is an error naming the version and SupportedText.
func Lookup(version string, okd bool) (Release, error) {
	name := RowName(version, okd)
	r, ok := Named(name)
	if !ok {
		what := "OpenShift"
		if okd {
			what = "OKD"
		}
		return Release{}, fmt.Errorf("the payload is %s %s; labbuild builds %s", what, version, SupportedText())
	}
	if r.StrictVersion && !StrictSemver(version) {
		return Release{}, fmt.Errorf("the payload's release-metadata version %q is not strict semver, which the %s CVO's render refuses (pkg/payload/render.go loadReleaseVersion)", version, r.Name)
	}
	return r, nil
}

// SupportedText names the supported releases for messages: "OpenShift 4.22, 4.20 and 4.18,
// and OKD 4.22".
func SupportedText() string {
	var ocp, okd []string
	for _, r := range Supported {
		v := fmt.Sprintf("%d.%d", r.Major, r.Minor)
		if r.OKD {
			okd = append(okd, v)
		} else {
			ocp = append(ocp, v)
		}
	}
	return "OpenShift " + and(ocp) + ", and OKD " + and(okd)
}

func and(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// majorMinor reads the first two numbers of a version ("4.22.0-okd-scos.1" → 4, 22).
func majorMinor(v string) (int, int, bool) {
	v = strings.TrimPrefix(v, "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	minor := parts[1]
	if i := strings.IndexAny(minor, "-+"); i >= 0 {
		minor = minor[:i]
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil || maj < 0 || min < 0 {
		return 0, 0, false
	}
	return maj, min, true
}

// Major returns the major version of a payload version, as blang/semver's ParseTolerant reads
// it (a leading "v" allowed), for the FeatureGate manifests' release.openshift.io/major-version.
func Major(version string) (int, bool) {
	maj, _, ok := majorMinor(version)
	if !ok {
		// ParseTolerant also accepts a bare major ("4").
		if n, err := strconv.Atoi(strings.TrimPrefix(version, "v")); err == nil && n >= 0 {
			return n, true
		}
	}
	return maj, ok
}

// StrictSemver reports whether v is a semantic version 2.0.0 as blang/semver's Parse accepts
// it: MAJOR.MINOR.PATCH without leading zeros, an optional pre-release of dot-separated
// identifiers (numeric ones without leading zeros) and optional build metadata.
func StrictSemver(v string) bool {
	core, build, hasBuild := strings.Cut(v, "+")
	if hasBuild && !idents(build, false) {
		return false
	}
	core, pre, hasPre := strings.Cut(core, "-")
	if hasPre && !idents(pre, true) {
		return false
	}
	nums := strings.Split(core, ".")
	if len(nums) != 3 {
		return false
	}
	for _, n := range nums {
		if !numeric(n) || (len(n) > 1 && n[0] == '0') {
			return false
		}
	}
	return true
}

// idents reports whether s is dot-separated non-empty [0-9A-Za-z-] identifiers; with
// noLeadingZero, numeric ones may not start with 0 (pre-release rules).
func idents(s string, noLeadingZero bool) bool {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		for _, c := range id {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
				return false
			}
		}
		if noLeadingZero && numeric(id) && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

func numeric(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
