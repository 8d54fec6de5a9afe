package rehearsal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/labbuild/labbuild/targets/kube"
)

// What the static-pod operators leave on a master once it runs their operand, as the rest of
// the cluster sees it (issue 38, stall 3): the kubelet's mirror pods of the operands' static
// pods — openshift-kube-apiserver/kube-apiserver-<node>, openshift-kube-scheduler/
// openshift-kube-scheduler-<node>, openshift-kube-controller-manager/kube-controller-manager-<node>
// — Running and Ready, and the node at a current revision in the operator's resource
// (kubeapiservers, kubeschedulers, kubecontrollermanagers "cluster": status.nodeStatuses, which
// the operators' node and installer controllers write, library-go pkg/operator/staticpod
// controller/node and installer). openshift-install's cluster-bootstrap waits for both before it
// lets the bootstrap go (pkg/start/status.go --required-pods, pkg/start/ha_checker.go), and so
// does labbuild's cluster/etcd. The rehearsal's operands are the stand-ins' real processes
// (startAPIServer), so each gets a stand-in static pod as the etcd member has (etcdStandinPodYAML):
// the pause image, with a readiness probe on the real program's health endpoint, so Ready means
// the program answers. The cluster-version-operator's pod (openshift-cluster-version/
// cluster-version-operator-…, a Deployment's on a master) is such a pod on the first master:
// the CVO is a stand-in of the flow, not a process.

// standinPod is one operand's stand-in static pod.
type standinPod struct {
	file, name, namespace, app string
	// port and path are the readiness probe's (HTTPS); 0 for none.
	port int
	path string
}

// standinPods are the control plane's operands' stand-in pods, named and namespaced as the
// operators' static pods (kube-apiserver-pod.yaml, kube-controller-manager-pod.yaml,
// kube-scheduler-pod.yaml), probed where the upstream programs serve their health: the
// kube-apiserver's /readyz on 6443, the controller manager's and the scheduler's /healthz on
// their secure ports (10257, 10259).
var standinPods = []standinPod{
	{"kube-apiserver-pod.yaml", "kube-apiserver", "openshift-kube-apiserver", "openshift-kube-apiserver", 6443, "/readyz"},
	{"kube-controller-manager-pod.yaml", "kube-controller-manager", "openshift-kube-controller-manager", "kube-controller-manager", 10257, "/healthz"},
	{"kube-scheduler-pod.yaml", "openshift-kube-scheduler", "openshift-kube-scheduler", "openshift-kube-scheduler", 10259, "/healthz"},
}

// cvoStandinPod is the cluster-version-operator's pod stand-in (no probe: Ready once running).
var cvoStandinPod = standinPod{"cluster-version-operator-pod.yaml", "cluster-version-operator", "openshift-cluster-version", "cluster-version-operator", 0, ""}

func (p standinPod) yaml() string {
	probe := ""
	if p.port != 0 {
		probe = `
    readinessProbe:
      httpGet: {path: ` + p.path + `, port: ` + strconv.Itoa(p.port) + `, scheme: HTTPS}
      periodSeconds: 5
      failureThreshold: 3`
	}
	return `apiVersion: v1
kind: Pod
metadata:
  name: ` + p.name + `
  namespace: ` + p.namespace + `
  labels: {app: ` + p.app + `, rehearsal-standin: "true"}
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  tolerations: [{operator: Exists}]
  containers:
  - name: ` + p.name + `
    image: ` + PauseImage + `
    imagePullPolicy: Never` + probe + "\n"
}

// writeStandinPods writes pods into the node's manifest directory (through the node's own
// mount namespace: its /etc is an overlay).
func (m *MasterStandins) writeStandinPods(ctx context.Context, pods []standinPod) error {
	staging := filepath.Join(filepath.Dir(m.Node.Root), "standin-pods")
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return err
	}
	for _, p := range pods {
		f := filepath.Join(staging, p.file)
		if err := os.WriteFile(f, []byte(p.yaml()), 0o644); err != nil {
			return err
		}
		if err := m.Node.Run(ctx, "standin-install", nil, "sh", "-c", "mkdir -p "+PodManifestDir+" && cp "+f+" "+PodManifestDir+"/"+p.file); err != nil {
			return err
		}
	}
	return nil
}

// staticPodOperators are the operator resources whose node statuses the stand-ins write, with
// their kinds.
var staticPodOperators = []struct {
	gvr  kube.GroupVersionResource
	kind string
}{
	{kube.GroupVersionResource{Group: "operator.openshift.io", Version: "v1", Resource: "kubeapiservers"}, "KubeAPIServer"},
	{kube.GroupVersionResource{Group: "operator.openshift.io", Version: "v1", Resource: "kubeschedulers"}, "KubeScheduler"},
	{kube.GroupVersionResource{Group: "operator.openshift.io", Version: "v1", Resource: "kubecontrollermanagers"}, "KubeControllerManager"},
}

// nodeStatusMu serialises the masters' read-modify-write of an operator resource's status.
var nodeStatusMu sync.Mutex

// ReportRevision is, for node, what a static-pod operator's node controller and installer
// controller write into its resource "cluster" once the operand runs there: a nodeStatuses entry
// for the node (the node controller adds it bare: the CRD refuses a revision on a new entry),
// then currentRevision 1 (the installer's first revision). The resource itself is created as
// the CVO applies it from the operator's manifests (spec.managementState Managed) when missing.
func ReportRevision(ctx context.Context, dyn kube.Interface, gvr kube.GroupVersionResource, kind, node string) error {
	nodeStatusMu.Lock()
	defer nodeStatusMu.Unlock()
	ri := dyn.Resource(gvr)
	for attempt := 0; ; attempt++ {
		err := func() error {
			o, err := ri.Get(ctx, "cluster", kube.GetOptions{})
			if kube.IsNotFound(err) {
				o, err = ri.Create(ctx, &kube.Unstructured{Object: map[string]any{"apiVersion": gvr.Group + "/" + gvr.Version, "kind": kind,
					"metadata": map[string]any{"name": "cluster"}, "spec": map[string]any{"managementState": "Managed"}}}, kube.CreateOptions{})
			}
			if err != nil {
				return err
			}
			st, _ := o.Object["status"].(map[string]any)
			if st == nil {
				st = map[string]any{}
				o.Object["status"] = st
			}
			list, _ := st["nodeStatuses"].([]any)
			for _, e := range list {
				m, _ := e.(map[string]any)
				if m["nodeName"] != node {
					continue
				}
				if fmt.Sprint(m["currentRevision"]) != "<nil>" && fmt.Sprint(m["currentRevision"]) != "0" {
					return nil
				}
				m["currentRevision"] = int64(1)
				_, err := ri.UpdateStatus(ctx, o, kube.UpdateOptions{})
				return err
			}
			st["nodeStatuses"] = append(list, map[string]any{"nodeName": node})
			if _, err := ri.UpdateStatus(ctx, o, kube.UpdateOptions{}); err != nil {
				return err
			}
			return errRetryRevision
		}()
		if err == nil {
			return nil
		}
		if err != errRetryRevision && (attempt == 20 || ctx.Err() != nil) {
			return fmt.Errorf("rehearsal: %s/cluster node status of %s: %w", gvr.Resource, node, err)
		}
		if err != errRetryRevision {
			time.Sleep(2 * time.Second)
		}
	}
}

// errRetryRevision says the entry was added and the revision is next.
var errRetryRevision = fmt.Errorf("node status added")
