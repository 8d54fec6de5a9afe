package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// payloadRelease is the release the stand-in plays, fixed when it is built, as the real MCO is
// one binary per release: its build knows its branch (pkg/version, set by the Makefile's
// -ldflags) and whether it is the OKD build (pkg/version/version_scos.go, `go build -tags scos`,
// MCO Dockerfile TAGS=scos). The sample payload (internal/rig/payload BuildStandin) builds it
// with
//
//	go build -ldflags "-X main.payloadRelease=<4.18|4.20|4.22|okd-4.22>" [-tags scos] ./internal/rig/standin/mco
//
// A build without -X plays 4.18 (the oldest supported release). An okd- name needs the scos
// tag, which is what makes the OKD build (scos).
var payloadRelease = "4.18"

// scos is set by release_scos.go under the scos build tag: the OKD build, whose base OS tag is
// stream-coreos (cmd/machine-config-operator/bootstrap.go baseOSContainerImageTag).
var scos = false

// The real pkg/version values of an MCO built without the release build's -ldflags, which is how
// the reference outputs (../shared/fixtures/mco-real) were made: Raw stamps the ControllerConfig
// (generated-by-version), Hash the generated and rendered MachineConfigs
// (generated-by-controller-version). The rendered configs' names do not depend on them.
var (
	versionRaw  = "v0.0.0-was-not-built-properly"
	versionHash = "was-not-built-properly"
)

// behaviour is what differs between the MCO release branches the stand-in follows. Each field
// names the upstream code it follows; the rows are in releases.
type behaviour struct {
	// name is the release line ("4.18"); branch and commit the machine-config-operator branch
	// the row was read from.
	name, branch, commit string
	// ignitionVersion is ign3types.MaxVersion of the Ignition spec the controller renders
	// (pkg/controller/common/helpers.go imports config/v3_4 at 4.18, v3_5 from 4.20).
	ignitionVersion string
	// cgroupV2KernelArgs are the kernel arguments of 97-<pool>-generated-kubelet for cgroup v2
	// (pkg/controller/kubelet-config/helpers.go updateMachineConfigwithCgroup kernelArgsv2;
	// 4.22 drops psi=0).
	cgroupV2KernelArgs []string
	// requiredTags are the image-references tags `machine-config-operator bootstrap` dies
	// without, in its order (cmd/machine-config-operator/bootstrap.go findImageOrDie; 4.22 adds
	// docker-registry, which also lands in the ControllerConfig's images as
	// dockerRegistryImage).
	requiredTags []string
	// platformTypeFunc and dnsRecordsTypeFunc: the template functions platformType (4.20+) and
	// dnsRecordsType (4.22) exist (pkg/controller/template/render.go renderTemplate).
	platformTypeFunc, dnsRecordsTypeFunc bool
	// defaultUlimits and autoSizing: the 4.20 controller bootstrap also writes
	// 00-override-<pool>-generated-crio-default-ulimits and 50-<pool>-auto-sizing-disabled
	// (pkg/controller/bootstrap/bootstrap.go Run: RunDefaultUlimitsBootstrap,
	// RunAutoSizingBootstrap; z-stream work that neither 4.18 nor 4.22 has).
	defaultUlimits, autoSizing bool
	// mergeUnsetsEmptyCompression: MergeMachineConfigs sets a nil compression to "" before each
	// merge and back to nil after it (4.20+ ignitionMergeSetFilesDefaultCompression /
	// ignitionMergeUnsetFilesDefaultCompression), so no rendered file keeps compression "".
	mergeUnsetsEmptyCompression bool
	// templateOSImageURL: template MachineConfigs carry the base OS image as osImageURL (4.18,
	// 4.20 generateMachineConfigForName); 4.22 clears osImageURL and
	// baseOSExtensionsContainerImage, and MergeMachineConfigs ignores generated MCs' values.
	templateOSImageURL bool
	// omitCreationTimestamp: the release's apimachinery (1.35 at 4.22) leaves a zero
	// metadata.creationTimestamp out instead of writing null.
	omitCreationTimestamp bool
	// kubeletZero is the JSON of an empty KubeletConfiguration as that release's
	// k8s.io/kubelet config/v1beta1 encodes it (kubeletconfig.EncodeKubeletConfig): every field
	// without omitempty, and structs, which encoding/json never omits.
	kubeletZero string
}

// kubeletZero131 is the empty KubeletConfiguration of k8s.io/kubelet v0.31 (MCO 4.18's
// vendor), encoded as pkg/controller/kubelet-config EncodeKubeletConfig does.
const kubeletZero131 = `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","syncFrequency":"0s","fileCheckFrequency":"0s","httpCheckFrequency":"0s","authentication":{"x509":{},"webhook":{"cacheTTL":"0s"},"anonymous":{}},"authorization":{"webhook":{"cacheAuthorizedTTL":"0s","cacheUnauthorizedTTL":"0s"}},"streamingConnectionIdleTimeout":"0s","nodeStatusUpdateFrequency":"0s","nodeStatusReportFrequency":"0s","imageMinimumGCAge":"0s","imageMaximumGCAge":"0s","volumeStatsAggPeriod":"0s","cpuManagerReconcilePeriod":"0s","runtimeRequestTimeout":"0s","evictionPressureTransitionPeriod":"0s","memorySwap":{},"logging":{"flushFrequency":0,"verbosity":0,"options":{"text":{"infoBufferSize":"0"},"json":{"infoBufferSize":"0"}}},"shutdownGracePeriod":"0s","shutdownGracePeriodCriticalPods":"0s","containerRuntimeEndpoint":""}`

// kubeletZero133 is the same for k8s.io/kubelet v0.33 and v0.35 (MCO 4.20 and 4.22, OpenShift's
// kubernetes staging forks): v0.31's plus the crashLoopBackOff struct.
var kubeletZero133 = strings.Replace(kubeletZero131, `"memorySwap":{}`, `"crashLoopBackOff":{},"memorySwap":{}`, 1)

var (
	tags418 = []string{"machine-config-operator", "keepalived-ipfailover", "coredns", "baremetal-runtimecfg",
		"oauth-proxy", "kube-rbac-proxy", "pod", "haproxy-router"}
	cgroupV2WithPSI = []string{"systemd.unified_cgroup_hierarchy=1", `cgroup_no_v1="all"`, "psi=0"}
)

// releases are the rows, by release line.
var releases = map[string]behaviour{
	"4.18": {
		name: "4.18", branch: "release-4.18", commit: "f313997e",
		ignitionVersion:    "3.4.0",
		cgroupV2KernelArgs: cgroupV2WithPSI,
		requiredTags:       tags418,
		templateOSImageURL: true,
		kubeletZero:        kubeletZero131,
	},
	"4.20": {
		name: "4.20", branch: "release-4.20", commit: "afed0993",
		ignitionVersion:             "3.5.0",
		cgroupV2KernelArgs:          cgroupV2WithPSI,
		requiredTags:                tags418,
		platformTypeFunc:            true,
		defaultUlimits:              true,
		autoSizing:                  true,
		mergeUnsetsEmptyCompression: true,
		templateOSImageURL:          true,
		kubeletZero:                 kubeletZero133,
	},
	"4.22": {
		name: "4.22", branch: "release-4.22", commit: "9027c94c",
		ignitionVersion:             "3.5.0",
		cgroupV2KernelArgs:          cgroupV2WithPSI[:2],
		requiredTags:                append(append([]string{}, tags418...), "docker-registry"),
		platformTypeFunc:            true,
		dnsRecordsTypeFunc:          true,
		mergeUnsetsEmptyCompression: true,
		omitCreationTimestamp:       true,
		kubeletZero:                 kubeletZero133,
	},
}

// current returns the row of the release this build plays (payloadRelease, its okd- prefix
// naming the OKD build of that release), or an error naming the ones the stand-in knows when
// the build set an unknown one.
func current() (behaviour, error) {
	line, okd := strings.CutPrefix(payloadRelease, "okd-")
	b, ok := releases[line]
	if !ok {
		known := slices.Sorted(maps.Keys(releases))
		return behaviour{}, fmt.Errorf("stand-in built for release %q; it plays %s (go build -ldflags \"-X main.payloadRelease=<release>\")", payloadRelease, strings.Join(known, ", "))
	}
	if okd && !scos {
		return behaviour{}, fmt.Errorf("stand-in built for %s without -tags scos: the OKD build is the scos one (MCO Dockerfile TAGS=scos)", payloadRelease)
	}
	return b, nil
}

// baseOSTag is the image-references tag of the node OS image
// (cmd/machine-config-operator/bootstrap.go baseOSContainerImageTag).
func baseOSTag() string {
	if scos {
		return "stream-coreos"
	}
	return "rhel-coreos"
}
