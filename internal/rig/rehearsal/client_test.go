package rehearsal

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/targets/kube"
)

// The in-cluster client in a flow (client.go): the pod is created on masters[0] as soon as its
// Node is Ready — before the pivot — and read through the API after cluster/done.

// clientNS and clientPodName name the client pod: ServiceAccount default/default exists from
// the start (the controller manager's serviceaccount controller), and so does the namespace's
// kube-root-ca.crt (its root-ca-cert-publisher).
const (
	clientNS      = "default"
	clientPodName = "rehearsal-in-cluster-client"
)

// clientTools builds the client image (ClientImageTarball) into the rig's work directory; the
// flow imports it into the client node's containerd (rig.kubelet).
func (r *rig) clientTools(t *testing.T, node string) {
	t.Helper()
	r.clientTar = filepath.Join(r.work, "cli.tar")
	if err := ClientImageTarball(r.clientTar, r.bins["busybox"], pinnedTool(t, "kubectl")); err != nil {
		t.Fatal(err)
	}
	r.clientNode = node
}

// startClient creates the client pod on node (a Node name) once its Node is Ready, retrying until the API
// takes it or ctx ends; the time it was created goes to created.
func startClient(ctx context.Context, r *rig, node string, fl *flowLog, created chan<- time.Time) {
	if !masterReady(ctx, r, node) {
		return
	}
	var obj map[string]any
	if err := json.Unmarshal(ClientPod(clientNS, clientPodName, node, "api-int."+labDomain), &obj); err != nil {
		fl.fail("in-cluster client: %v", err)
		return
	}
	for ctx.Err() == nil {
		k, err := r.clients()
		if err == nil {
			_, err = k.Dynamic.Resource(kube.Pods).Namespace(clientNS).Create(ctx, &kube.Unstructured{Object: obj}, kube.CreateOptions{})
			if err == nil || kube.IsAlreadyExists(err) {
				fl.logf("in-cluster client: pod %s/%s created on %s", clientNS, clientPodName, node)
				created <- time.Now()
				return
			}
		}
		fl.logf("in-cluster client: create pod: %v", err)
		select {
		case <-ctx.Done():
		case <-time.After(3 * time.Second):
		}
	}
}

// awaitClientAnswer waits up to limit for the in-cluster client's first probe answered as
// its ServiceAccount (both clients), and says whether one came. The flow holds the bootstrap's
// etcd teardown on it: a real bootstrap runs for many minutes, long past the kubelet's first
// Service list, but in the rehearsal it could leave within seconds of the pod's creation,
// while the kubelet still refused to start the container ("services have not yet been read
// at least once, cannot construct envvars": its Service informer backs off while the node is
// still anonymous; TestRehearsalMirrorFlow, whose kubelets start after the mirror pulls).
func awaitClientAnswer(ctx context.Context, nd *Node, limit time.Duration) bool {
	// The container's log as the kubelet writes it on the node (CRI format: time, stream,
	// tag, line), read in the node's mount namespace: no API server needed before the pivot.
	glob := fmt.Sprintf("/proc/%d/root/var/log/pods/%s_%s_*/client/*.log", nd.holder.Process.Pid, clientNS, clientPodName)
	deadline := time.Now().Add(limit)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if probes, _ := ParseClientLog(criLogLines(b)); firstOK(probes) != nil {
				return true
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	return false
}

// criLogLines is the text of a CRI container log file (each line "<time> <stream> <P|F>
// <text>", the kubelet's /var/log/pods format): the texts, one a line.
func criLogLines(b []byte) string {
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if parts := strings.SplitN(l, " ", 4); len(parts) == 4 {
			lines = append(lines, parts[3])
		}
	}
	return strings.Join(lines, "\n")
}

// TestCRILogLines: a probe answered in the CRI file is found; the prefix is not part of it.
func TestCRILogLines(t *testing.T) {
	for _, c := range []struct {
		log  string
		want bool
	}{
		{"2026-11-29T09:30:33.1Z stdout F probe 1 1764408633 fresh=[system:serviceaccount:default:default] proxy=[system:serviceaccount:default:default]\n", true},
		{"2026-11-29T09:30:33.1Z stdout F probe 1 1764408633 fresh=[Unable to connect] proxy=[system:serviceaccount:default:default]\n", false},
		{"probe 1 1764408633 fresh=[system:serviceaccount:default:default] proxy=[system:serviceaccount:default:default]\n", false},
		{"", false},
	} {
		probes, _ := ParseClientLog(criLogLines([]byte(c.log)))
		if got := firstOK(probes) != nil; got != c.want {
			t.Errorf("%q: answered %v, want %v", c.log, got, c.want)
		}
	}
}

// clientLog is the client container's whole log through the API (the kubelet serves it).
func clientLog(ctx context.Context, k *kube.Clients) (string, error) {
	b, err := k.REST.Do(ctx, "GET", "/api/v1/namespaces/"+clientNS+"/pods/"+clientPodName+"/log", url.Values{"container": {"client"}}, "", nil)
	return string(b), err
}

// checkClient is what issue 38 asks of an in-cluster client: after cluster/done, the pod
// started before the pivot has reached the API as its ServiceAccount before the bootstrap
// stopped (bootstrapOff) and, with the same container — kubectl proxy holding the CA it read
// at start — after it. It waits up to limit for a probe after the pivot in which both clients
// are answered and the latest probe is answered too.
func checkClient(ctx context.Context, t *testing.T, r *rig, created, bootstrapOff time.Time, limit time.Duration) {
	t.Helper()
	if created.IsZero() {
		t.Errorf("in-cluster client: the pod was never created")
		return
	}
	if bootstrapOff.IsZero() {
		t.Errorf("in-cluster client: the bootstrap never stopped")
		return
	}
	deadline := time.Now().Add(limit)
	var last string
	for {
		k, err := r.clients()
		var log string
		if err == nil {
			log, err = clientLog(ctx, k)
		}
		probes, proxyLog := ParseClientLog(log)
		var before, after []ClientProbe
		for _, p := range probes {
			if p.At < bootstrapOff.Unix() {
				before = append(before, p)
			} else {
				after = append(after, p)
			}
		}
		okBefore := firstOK(before)
		okAfter := firstOK(after)
		switch {
		case err != nil:
			last = fmt.Sprintf("client log: %v", err)
		case okBefore == nil:
			last = fmt.Sprintf("no probe before the pivot (%s) reached the API as the ServiceAccount: %d probes before it, the last: %s", bootstrapOff.Format("15:04:05"), len(before), lastProbe(before))
		case okAfter != nil && after[len(after)-1].OK():
			t.Logf("in-cluster client on %s (pod created %s, bootstrap off %s): before the pivot %s; after it %s; latest %s",
				r.clientNode, created.Format("15:04:05"), bootstrapOff.Format("15:04:05"), okBefore, okAfter, after[len(after)-1])
			return
		default:
			last = fmt.Sprintf("after the pivot (%s): %d probes, none answered for both clients or the latest not: %s; kubectl proxy's log: %s",
				bootstrapOff.Format("15:04:05"), len(after), lastProbe(after), tailLines(proxyLog, 3))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Errorf("in-cluster client (a real pod on %s, its projected kube-root-ca.crt and token, through api-int): %s", r.clientNode, last)
			return
		}
		time.Sleep(5 * time.Second)
	}
}

func firstOK(ps []ClientProbe) *ClientProbe {
	for i := range ps {
		if ps[i].OK() {
			return &ps[i]
		}
	}
	return nil
}

func lastProbe(ps []ClientProbe) string {
	if len(ps) == 0 {
		return "(none)"
	}
	return ps[len(ps)-1].String()
}

func tailLines(ls []string, n int) string {
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}

// TestClientLogAndPod: the client pod's manifest is a Pod bound to its node on the host
// network with api-int as the service host, and its log's probe lines parse (make check).
func TestClientLogAndPod(t *testing.T) {
	var pod struct {
		Kind string
		Spec struct {
			NodeName    string
			HostNetwork bool
			Containers  []struct {
				Image, ImagePullPolicy string
				Command                []string
				Env                    []struct{ Name, Value string }
			}
		}
	}
	if err := json.Unmarshal(ClientPod("default", "c", "master-0.x", "api-int.x"), &pod); err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	if pod.Kind != "Pod" || pod.Spec.NodeName != "master-0.x" || !pod.Spec.HostNetwork || c.Image != ClientImage || c.ImagePullPolicy != "Never" ||
		!strings.Contains(c.Command[2], "kubectl proxy") || c.Env[0] != (struct{ Name, Value string }{"KUBERNETES_SERVICE_HOST", "api-int.x"}) {
		t.Errorf("client pod: %+v", pod)
	}
	log := "proxy-log: Starting to serve on 127.0.0.1:18001\n" +
		"probe 1 100 fresh=[system:serviceaccount:default:default] proxy=[system:serviceaccount:default:default]\n" +
		"proxy-log: E1 proxy.go: Error while proxying request: tls: failed to verify certificate: x509: certificate signed by unknown authority\n" +
		"probe 2 105 fresh=[Unable to connect to the server: tls: failed to verify certificate: x509: certificate signed by unknown authority] proxy=[wget: server returned error: HTTP/1.1 502 Bad Gateway]\n"
	probes, proxyLog := ParseClientLog(log)
	if len(probes) != 2 || !probes[0].OK() || probes[1].OK() || probes[1].At != 105 || !strings.Contains(probes[1].Fresh, "x509") {
		t.Errorf("probes: %+v", probes)
	}
	if len(proxyLog) != 2 || !strings.Contains(proxyLog[1], "unknown authority") {
		t.Errorf("proxy log: %q", proxyLog)
	}
}
