package targets

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/wait"
)

// TestVIPMastersReady: the pivot powers the bootstrap off only when every master's keepalived
// and haproxy mirror pods are Running and Ready.
func TestVIPMastersReady(t *testing.T) {
	// Each pod is a core/v1 Pod read through vipPod, as the API's JSON would be.
	pod := func(name string, ready bool) vipPod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p := corev1.Pod{}
		p.Name = name
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var v vipPod
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	masters := []string{"master-0.ocp4.example.com", "master-1.ocp4.example.com"}
	all := []vipPod{pod("keepalived-master-0.ocp4.example.com", true), pod("haproxy-master-0.ocp4.example.com", true),
		pod("keepalived-master-1.ocp4.example.com", true), pod("haproxy-master-1.ocp4.example.com", true), pod("coredns-master-1.ocp4.example.com", false)}
	if ok, st := vipMastersReady(all, masters); !ok {
		t.Errorf("all Ready: %s", st)
	}
	notReady := slices.Clone(all)
	notReady[3] = pod("haproxy-master-1.ocp4.example.com", false)
	if ok, st := vipMastersReady(notReady, masters); ok || !strings.Contains(st, "haproxy-master-1.ocp4.example.com") {
		t.Errorf("haproxy not Ready on master-1: ok=%v %s", ok, st)
	}
	if ok, st := vipMastersReady(all[:2], masters); ok || !strings.Contains(st, "keepalived-master-1.ocp4.example.com") {
		t.Errorf("master-1's pods missing: ok=%v %s", ok, st)
	}
}

// TestClusterPivotInCluster runs cluster/pivot in the in-cluster mode against an API server
// stand-in (httptest: the pod list of openshift-kni-infra and /readyz): it switches no host
// haproxy, powers the bootstrap off only once every master's keepalived and haproxy pods are
// Ready (the third listing here), and then waits for /readyz through the VIP. On platform
// baremetal it then unpauses the paused BareMetalHosts, and a kube-apiserver that answers the
// first two lists with 503 "storage is (re)initializing" (a master's, right after the bootstrap
// left: its CRD storage is still being set up) is waited for, not a failure.
func TestClusterPivotInCluster(t *testing.T) {
	for _, platform := range []string{"", lab.PlatformBaremetal} {
		t.Run("platform="+platform, func(t *testing.T) { clusterPivotInCluster(t, platform) })
	}
}

func clusterPivotInCluster(t *testing.T, platform string) {
	c := clusterConfig(3, 0)
	c.Network.LoadBalancer = lab.LoadBalancerInCluster
	c.Platform = platform
	c.Wait.PivotMinutes = 1
	var polls, readyz, bmhLists atomic.Int32
	var unpaused atomic.Value
	bmhPath := "/apis/metal3.io/v1alpha1/namespaces/" + manifests.MachineAPINamespace + "/baremetalhosts"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/namespaces/" + vipInfraNamespace + "/pods":
			n := polls.Add(1)
			list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
			for i, m := range []string{"master-0", "master-1", "master-2"} {
				for _, pod := range []string{"keepalived", "haproxy"} {
					ready := corev1.ConditionTrue
					if n < 3 && i == 2 && pod == "haproxy" {
						ready = corev1.ConditionFalse // master-2's haproxy comes up late
					}
					p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod + "-" + m + ".ocp4.example.com", Namespace: vipInfraNamespace}}
					p.Status.Phase = corev1.PodRunning
					p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
					list.Items = append(list.Items, p)
				}
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(list)
		case "/readyz":
			readyz.Add(1)
			io.WriteString(w, "ok")
		case bmhPath:
			w.Header().Set("Content-Type", "application/json")
			if bmhLists.Add(1) <= 2 {
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"storage is (re)initializing","reason":"ServiceUnavailable","code":503}`)
				return
			}
			io.WriteString(w, `{"apiVersion":"metal3.io/v1alpha1","kind":"BareMetalHostList","metadata":{},"items":[`+
				`{"apiVersion":"metal3.io/v1alpha1","kind":"BareMetalHost","metadata":{"name":"worker-0","namespace":"openshift-machine-api","annotations":{"`+manifests.BMHPausedAnnotation+`":""}}}]}`)
		case bmhPath + "/worker-0":
			if r.Method != http.MethodPatch {
				http.Error(w, "want PATCH", http.StatusMethodNotAllowed)
				return
			}
			b, _ := io.ReadAll(r.Body)
			unpaused.Store(string(b))
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"apiVersion":"metal3.io/v1alpha1","kind":"BareMetalHost","metadata":{"name":"worker-0","namespace":"openshift-machine-api"}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	machines := &pivotMachines{fakeMachines: newFakeMachines(c), polls: &polls}
	machines.Start(context.Background(), "bootstrap")
	lb := &fakeBalancer{}
	w := apiStandinWorld(t, srv.URL)
	w.machines = func(uri, cluster string) ClusterMachines { return machines }
	w.balancer = func() ClusterBalancer { return lb }
	clusterEnv = w
	ts := []*engine.Target{clusterStandinFile(adminKubeconfig, "kubeconfig", "apiVersion: v1\nkind: Config\n")}
	for _, x := range clusterTargets(c, func(n string) bool { return n == adminKubeconfig }) {
		if x.Name == "cluster/pivot" {
			if slices.Contains(x.Deps, clusterPostPivot) {
				t.Errorf("in-cluster cluster/pivot depends on %s", clusterPostPivot)
			}
			ts = append(ts, x)
			for _, d := range x.Deps { // its upstream: done
				if d != adminKubeconfig {
					ts = append(ts, clusterStandinFile(d, "record.json", "{}"))
				}
			}
		}
	}
	var stderr strings.Builder
	if _, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: t.TempDir(), Goals: []string{"cluster/pivot"}, Targets: ts, Jobs: 1, Now: time.Now, Stderr: &stderr}); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if _, stops := machines.count("bootstrap"); stops != 1 {
		t.Errorf("bootstrap stopped %d times, want 1", stops)
	}
	if at := machines.stopAt.Load(); at < 3 {
		t.Errorf("bootstrap stopped after %d pod listings, before every master's haproxy was Ready (the 3rd)", at)
	}
	if readyz.Load() == 0 {
		t.Error("pivot never checked /readyz")
	}
	if len(lb.cfg) != 0 {
		t.Errorf("in-cluster pivot switched a host haproxy: %v", lb.cfg)
	}
	patch, _ := unpaused.Load().(string)
	switch {
	case platform == "" && (bmhLists.Load() != 0 || patch != ""):
		t.Errorf("platform none: %d BareMetalHost lists, patch %q; want none", bmhLists.Load(), patch)
	case platform == lab.PlatformBaremetal && (bmhLists.Load() != 3 || !strings.Contains(patch, manifests.BMHPausedAnnotation+`":null`)):
		t.Errorf("baremetal: %d BareMetalHost lists (want 3: two 503s, then the list), unpause patch %q", bmhLists.Load(), patch)
	}
}

// TestVIPKeepalivedState reads the API VRRP instance's state from keepalived container logs as
// keepalived 2.2 writes them with --log-console --log-detail.
func TestVIPKeepalivedState(t *testing.T) {
	for _, tc := range []struct{ name, log, want string }{
		{"no config yet", "+ '[' -s /etc/keepalived/keepalived.conf ']'\n+ rm -f /var/run/keepalived/keepalived.sock\n", ""},
		{"started", "Starting VRRP child process, pid=12\nThu Nov 26 17:00:41 2026: (ocp4_API_0) Entering BACKUP STATE (init)\n", "BACKUP"},
		{"took the VIP", "(ocp4_API_0) Entering BACKUP STATE (init)\n(ocp4_API_0) Entering MASTER STATE\n(ocp4_API_0) Sending/queueing gratuitous ARPs on br0 for 198.18.0.5\n", "MASTER"},
		{"fault after master", "(ocp4_API_0) Entering MASTER STATE\n(ocp4_API_0) Entering FAULT STATE\n", "FAULT"},
		{"dual stack, one in fault", "(ocp4_API_0) Entering BACKUP STATE (init)\n(ocp4_API_1) Entering FAULT STATE\n", "FAULT"},
		{"dual stack", "(ocp4_API_0) Entering BACKUP STATE (init)\n(ocp4_API_1) Entering BACKUP STATE (init)\n(ocp4_API_1) Entering MASTER STATE\n", "MASTER"},
		{"only the ingress instance", "(ocp4_INGRESS_0) Entering BACKUP STATE (init)\n", ""},
	} {
		if got := vipKeepalivedState([]byte(tc.log)); got != tc.want {
			t.Errorf("%s: state %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestClusterEtcdWaitsForMastersKeepalived runs cluster/etcd in the in-cluster mode against an
// API server stand-in (httptest) on which bootstrap-complete's own gate holds from the start
// (the required pods and etcd Ready on the three masters, the static-pod operators at a
// revision on all three, HighlyAvailable, two API addresses): it creates
// kube-system/bootstrap only once the keepalived container of every master's mirror pod logs
// its API instance in BACKUP or MASTER (master-2's keepalived-monitor writes keepalived.conf
// at the 3rd log read), and never while one master's log shows none.
func TestClusterEtcdWaitsForMastersKeepalived(t *testing.T) {
	c := clusterConfig(3, 0)
	c.Network.LoadBalancer = lab.LoadBalancerInCluster
	c.Wait.EtcdMinutes = 1
	masters := []string{"master-0.ocp4.example.com", "master-1.ocp4.example.com", "master-2.ocp4.example.com"} // the Node names
	var reads, readsAtMark atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		podPrefix := map[string]string{"openshift-etcd": "etcd"} // namespace → a pod name prefix running on every master
		for _, clause := range kube.RequiredPods {
			ns, prefix, _ := strings.Cut(clause, "/")
			podPrefix[ns] = prefix
		}
		ns, isPods := strings.CutPrefix(r.URL.Path, "/api/v1/namespaces/")
		ns, isPods = strings.CutSuffix(ns, "/pods")
		switch p := r.URL.Path; {
		case isPods && podPrefix[ns] != "":
			list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
			for _, m := range masters {
				pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podPrefix[ns] + "-" + m, Namespace: ns}, Spec: corev1.PodSpec{NodeName: m}}
				pod.Status.Phase = corev1.PodRunning
				pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
				list.Items = append(list.Items, pod)
			}
			json.NewEncoder(w).Encode(list)
		case strings.HasPrefix(p, "/apis/operator.openshift.io/v1/") && strings.HasSuffix(p, "/cluster"):
			var st []string
			for _, m := range masters {
				st = append(st, `{"nodeName":"`+m+`","currentRevision":1}`)
			}
			io.WriteString(w, `{"apiVersion":"operator.openshift.io/v1","kind":"KubeAPIServer","metadata":{"name":"cluster"},"status":{"nodeStatuses":[`+strings.Join(st, ",")+`]}}`)
		case p == "/apis/config.openshift.io/v1/infrastructures/cluster":
			io.WriteString(w, `{"apiVersion":"config.openshift.io/v1","kind":"Infrastructure","metadata":{"name":"cluster"},"status":{"controlPlaneTopology":"HighlyAvailable"}}`)
		case p == "/api/v1/namespaces/default/endpoints/kubernetes":
			io.WriteString(w, `{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"kubernetes"},"subsets":[{"addresses":[{"ip":"198.18.0.10"},{"ip":"198.18.0.11"}]}]}`)
		case strings.HasPrefix(p, "/api/v1/namespaces/"+vipInfraNamespace+"/pods/keepalived-") && strings.HasSuffix(p, "/log"):
			if r.URL.Query().Get("container") != "keepalived" {
				http.Error(w, "wrong container", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			n := reads.Add(1)
			io.WriteString(w, "+ rm -f /var/run/keepalived/keepalived.sock\n")
			if !strings.Contains(p, "master-2") || n >= 9 { // three masters a round: master-2 from the 3rd round
				io.WriteString(w, "Thu Nov 26 17:00:41 2026: (ocp4_API_0) Entering BACKUP STATE (init)\n")
			}
		case p == "/api/v1/namespaces/kube-system/configmaps/bootstrap" && r.Method == http.MethodPatch:
			readsAtMark.Store(reads.Load())
			io.WriteString(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bootstrap","namespace":"kube-system"},"data":{"status":"complete"}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	clusterEnv = apiStandinWorld(t, srv.URL)
	clusterEnv.clock = wait.NewFakeClock(time.Unix(1e9, 0)) // cluster-bootstrap's 30 s teardown delay, not slept
	ts := []*engine.Target{clusterStandinFile(adminKubeconfig, "kubeconfig", "apiVersion: v1\nkind: Config\n"), clusterStandinFile("cluster/masters", "record.json", "{}")}
	for _, x := range clusterTargets(c, func(n string) bool { return n == adminKubeconfig }) {
		if x.Name == "cluster/etcd" {
			if !slices.Contains(x.Reads, "network.loadBalancer") {
				t.Errorf("in-cluster cluster/etcd does not read network.loadBalancer: %v", x.Reads)
			}
			ts = append(ts, x)
		}
	}
	var stderr strings.Builder
	out := t.TempDir()
	if _, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{"cluster/etcd"}, Targets: ts, Jobs: 1, Now: time.Now, Stderr: &stderr}); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if at := readsAtMark.Load(); at < 9 {
		t.Errorf("kube-system/bootstrap written after %d log reads, before master-2's keepalived ran the API instance (the 9th)", at)
	}
	log, err := os.ReadFile(filepath.Join(out, ".labbuild", "log", "cluster", "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"master-2.ocp4.example.com (keepalived not started: no keepalived.conf yet)", "keepalived runs the API VRRP instance on 3 masters (3 BACKUP, 0 MASTER)"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("cluster/etcd's log lacks %q:\n%s", want, log)
		}
	}
}
