package rehearsal

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The in-cluster client (issue 38, stall 2): a pod that a real kubelet starts from a real
// manifest, whose container runs a real client with nothing but what the kubelet projects into
// it — the ServiceAccount token and the kube-root-ca.crt ConfigMap's ca.crt
// (/var/run/secrets/kubernetes.io/serviceaccount) — and reaches the API through api-int, as the
// in-cluster components configured by the cluster-network-operator's apiserver-url.env do
// (KUBERNETES_SERVICE_HOST=api-int.<domain>, KUBERNETES_SERVICE_PORT=6443: the MCO template
// templates/common/_base/files/apiserver-url-env.yaml). The rehearsal has no service proxy
// (kube-proxy's image is the payload's, which cannot run here, and OVN-Kubernetes is not run),
// so the service IP 172.30.0.1 leads nowhere; api-int is what the masters' kubelets and the
// host-network operators use.
//
// Two clients run side by side in the one container:
//   - `kubectl proxy`, started once when the pod starts: client-go's rest.InClusterConfig reads
//     the CA file once into its transport (transport.loadTLSFiles), as the in-cluster CVO,
//     ovnkube-node and the machine-config daemon do; every request the container sends through
//     it goes with that CA;
//   - a fresh `kubectl auth whoami` every ClientProbeSeconds, which rereads the projected files.
//
// Both ask for a SelfSubjectReview (authentication.k8s.io/v1), which every authenticated user
// may create (system:basic-user) and which needs the token: /readyz would answer anyone.

// ClientImage is the local name of the stand-in for the release's `cli` image (the oc client,
// openshift/oc): static busybox (sh, wget, date, sleep, grep, sed, tail) and kubectl, the
// client the rehearsal's bootkube.service also runs as `oc` (.ci/build-kube.sh, the apiserver's
// version). The sample payload carries no cli image (payload.Tags: only what labbuild's
// targets, bootkube.sh and the MCO bootstrap read), so the pod names this image with
// imagePullPolicy Never and the rehearsal imports it into the node's containerd.
const ClientImage = "labbuild.rehearsal/cli:standin"

// ClientProbeSeconds is the time between two probes of the client pod.
const ClientProbeSeconds = 5

// ClientProxyPort is where the client's `kubectl proxy` listens in the pod (host network:
// the node's loopback).
const ClientProxyPort = 18001

// ClientImageTarball writes ClientImage as a docker-archive tarball to file, from the host's
// static busybox and the static kubectl at kubectl.
func ClientImageTarball(file, busybox, kubectl string) error {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return fmt.Errorf("rehearsal: client image: %w", err)
	}
	kc, err := os.ReadFile(kubectl)
	if err != nil {
		return fmt.Errorf("rehearsal: client image: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin/", "usr/", "usr/bin/"} {
		tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755})
	}
	tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777})
	tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))})
	tw.Write(bb)
	for _, l := range []string{"sh", "sleep", "date", "wget", "grep", "sed", "tail", "cat", "echo"} {
		tw.WriteHeader(&tar.Header{Name: "bin/" + l, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
	}
	tw.WriteHeader(&tar.Header{Name: "usr/bin/kubectl", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(kc))})
	tw.Write(kc)
	if err := tw.Close(); err != nil {
		return err
	}
	return writeImage(file, ClientImage, buf.Bytes(), v1.Config{Env: []string{"PATH=/usr/bin:/bin", "HOME=/tmp"}})
}

// clientScript is the client container's command: kubectl proxy in the background (its log
// lines prefixed "proxy-log: " by the shell, which writes each at once where sed would buffer
// them), then (the API pretty-prints its JSON for wget's User-Agent: "username": "…") one probe line every ClientProbeSeconds:
//
//	probe <n> <unix seconds> fresh=[<username or kubectl's last line>] proxy=[<username or wget's last line>]
const clientScript = `kubectl proxy --address=127.0.0.1 --port=%[1]d 2>&1 | while IFS= read -r l; do echo "proxy-log: $l"; done &
n=0
while :; do
  n=$((n+1))
  ts=$(date +%%s)
  f=$(kubectl auth whoami -o jsonpath='{.status.userInfo.username}' 2>&1 | tail -n1)
  p=$(wget -q -O- --header='Content-Type: application/json' \
    --post-data='{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}' \
    http://127.0.0.1:%[1]d/apis/authentication.k8s.io/v1/selfsubjectreviews 2>&1)
  u=$(echo "$p" | sed -n 's/.*"username": *"\([^"]*\)".*/\1/p')
  [ -n "$u" ] || u=$(echo "$p" | tail -n1)
  echo "probe $n $ts fresh=[$f] proxy=[$u]"
  sleep %[2]d
done
`

// ClientPod is the client pod's manifest (JSON): namespace ns, ServiceAccount default, bound to
// node (spec.nodeName: the kubelet there starts it; no scheduler decision is under test),
// host network (api-int resolves through the node's resolver, as for the host-network operators
// and the daemon), tolerating every taint, the token and CA automounted (the ServiceAccount
// admission plugin adds the projected kube-api-access volume), and KUBERNETES_SERVICE_HOST/PORT
// set to api-int as apiserver-url.env sets them.
func ClientPod(ns, name, node, apiInt string) []byte {
	script := fmt.Sprintf(clientScript, ClientProxyPort, ClientProbeSeconds)
	q := func(s string) string { return strconv.Quote(s) }
	return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":` + q(name) + `,"namespace":` + q(ns) + `,"labels":{"app":"rehearsal-in-cluster-client"}},
"spec":{"nodeName":` + q(node) + `,"hostNetwork":true,"serviceAccountName":"default","automountServiceAccountToken":true,
"tolerations":[{"operator":"Exists"}],"terminationGracePeriodSeconds":1,
"containers":[{"name":"client","image":` + q(ClientImage) + `,"imagePullPolicy":"Never",
"command":["/bin/sh","-c",` + q(script) + `],
"env":[{"name":"KUBERNETES_SERVICE_HOST","value":` + q(apiInt) + `},{"name":"KUBERNETES_SERVICE_PORT","value":"6443"},{"name":"HOME","value":"/tmp"}]}]}}`)
}

// ClientProbe is one probe line of the client pod's log: the time (unix seconds, the node's
// clock, which is this host's) and what each client got: the ServiceAccount's username when
// the API answered, else the client's error.
type ClientProbe struct {
	N            int
	At           int64
	Fresh, Proxy string
}

// OK reports whether both clients were answered as a ServiceAccount.
func (p ClientProbe) OK() bool {
	return strings.HasPrefix(p.Fresh, "system:serviceaccount:") && strings.HasPrefix(p.Proxy, "system:serviceaccount:")
}

func (p ClientProbe) String() string {
	return fmt.Sprintf("probe %d at %d: fresh kubectl [%s], kubectl proxy (CA loaded at start) [%s]", p.N, p.At, p.Fresh, p.Proxy)
}

var probeLine = regexp.MustCompile(`(?m)^probe (\d+) (\d+) fresh=\[(.*)\] proxy=\[(.*)\]$`)

// ParseClientLog returns the probes of a client pod's log, in order, and its proxy-log lines
// (kubectl proxy's own errors: the x509 verdict of its transport).
func ParseClientLog(log string) (probes []ClientProbe, proxyLog []string) {
	for _, m := range probeLine.FindAllStringSubmatch(log, -1) {
		n, _ := strconv.Atoi(m[1])
		at, _ := strconv.ParseInt(m[2], 10, 64)
		probes = append(probes, ClientProbe{N: n, At: at, Fresh: m[3], Proxy: m[4]})
	}
	for _, l := range strings.Split(log, "\n") {
		if s, ok := strings.CutPrefix(l, "proxy-log: "); ok {
			proxyLog = append(proxyLog, s)
		}
	}
	return probes, proxyLog
}
