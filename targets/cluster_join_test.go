package targets

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/wait"
)

const (
	joinTestNode = "worker-0.ocp4.example.com"
	joinTestIP   = "192.168.126.110"
)

// joinTestCSR is a CSR of worker-0 as the API server returns it: a serving CSR from the node
// itself (serving), else a client CSR from the node-bootstrapper; approved adds the Approved
// condition.
func joinTestCSR(t *testing.T, name string, serving, approved bool) csr.CertificateSigningRequest {
	t.Helper()
	c := certificatesv1.CertificateSigningRequest{TypeMeta: metav1.TypeMeta{APIVersion: "certificates.k8s.io/v1", Kind: "CertificateSigningRequest"}, ObjectMeta: metav1.ObjectMeta{Name: name}}
	var err error
	if serving {
		c.Spec.Request, _, err = clusterCSR(joinTestNode, []string{joinTestNode, "worker-0"}, []string{joinTestIP})
		c.Spec.SignerName, c.Spec.Username, c.Spec.Groups = csr.SignerServing, csr.NodeUserPrefix+joinTestNode, []string{csr.NodesGroup, "system:authenticated"}
		c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	} else {
		c.Spec.Request, _, err = clusterCSR(joinTestNode, nil, nil)
		c.Spec.SignerName, c.Spec.Username = csr.SignerClient, csr.NodeBootstrapperSA
		c.Spec.Groups = []string{"system:authenticated", "system:serviceaccounts", "system:serviceaccounts:openshift-machine-config-operator"}
		c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	}
	if err != nil {
		t.Fatal(err)
	}
	if approved {
		c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: csr.ApprovalReason}}
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var out csr.CertificateSigningRequest
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestJoinServing is the table of clusterJoin's last condition, once every node is Ready:
// the join is not done while a lab CSR labbuild would approve is pending (a serving CSR that
// arrived after the Node turned Ready, a late client CSR), nor while a Ready node has not asked
// for its serving certificate, for joinServingPolls polls; it is done once the serving CSR is
// approved, when the only pending CSR is one labbuild refuses (its refusal is logged), and
// when a node's serving CSR stays absent past those polls (collected an hour after issue).
func TestJoinServing(t *testing.T) {
	want := []string{joinTestNode}
	expected := map[string]csr.NodeIdentity{joinTestNode: {Name: joinTestNode, IPs: []string{joinTestIP}, DNSNames: []string{"worker-0"}}}
	servingPending := joinTestCSR(t, "csr-serving", true, false)
	servingApproved := joinTestCSR(t, "csr-serving", true, true)
	clientApproved := joinTestCSR(t, "csr-client", false, true)
	foreign := joinTestCSR(t, "csr-foreign", true, false)
	foreign.Spec.Username = csr.NodeUserPrefix + "intruder.example.com" // asks for worker-0's name: refused
	tests := []struct {
		name   string
		polls  [][]csr.CertificateSigningRequest // the CSR list at each poll
		done   []bool                            // the verdict at each poll
		status string                            // a substring of the first poll's status
	}{
		{"serving CSR pending after Ready", [][]csr.CertificateSigningRequest{{clientApproved, servingPending}, {clientApproved, servingApproved}},
			[]bool{false, true}, "1 lab node CSRs pending"},
		{"client CSR pending", [][]csr.CertificateSigningRequest{{joinTestCSR(t, "csr-client", false, false)}}, []bool{false}, "1 lab node CSRs pending"},
		{"serving CSR approved", [][]csr.CertificateSigningRequest{{clientApproved, servingApproved}}, []bool{true}, ""},
		{"only a refused CSR pending", [][]csr.CertificateSigningRequest{{servingApproved, foreign}}, []bool{true}, ""},
		{"serving CSR not yet asked for, then asked", [][]csr.CertificateSigningRequest{{clientApproved}, {clientApproved, servingPending}, {clientApproved, servingApproved}},
			[]bool{false, false, true}, "waiting for the kubelet serving CSR of " + joinTestNode},
		{"serving CSR collected long ago", [][]csr.CertificateSigningRequest{{}, {}, {}, {}, {}}, []bool{false, false, false, false, true}, "waiting for the kubelet serving CSR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &joinServing{}
			for i, list := range tt.polls {
				done, st := j.look(want, list, expected, nil)
				if done != tt.done[i] {
					t.Errorf("poll %d: done = %v (%q), want %v", i+1, done, st, tt.done[i])
				}
				if i == 0 && !strings.Contains(st, tt.status) {
					t.Errorf("poll 1: status %q, want it to say %q", st, tt.status)
				}
			}
		})
	}
}

// TestClusterJoinWaitsForServingCSR runs cluster/workers against an API server stand-in
// (httptest) whose worker-0 is Ready at the first poll and asks for its serving certificate
// only after that, as a kubelet does once its Node status has addresses: the join approves
// that CSR before it is done. Without a serving CSR ever (the kubelet's was collected long
// ago) the join waits joinServingPolls polls for one, then is done.
func TestClusterJoinWaitsForServingCSR(t *testing.T) {
	for _, tc := range []struct {
		name      string
		late      bool // the serving CSR arrives after the first node listing
		approvals int
		listings  int // node listings until done
	}{
		{"serving CSR after Ready", true, 1, 2},
		{"no serving CSR", false, 0, 1 + joinServingPolls},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clusterConfig(1, 1)
			c.Wait.WorkersMinutes = 5
			serving := joinTestCSR(t, "csr-serving", true, false)
			var mu sync.Mutex
			var csrs []csr.CertificateSigningRequest
			approvals, listings := 0, 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				switch {
				case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes":
					listings++
					n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: joinTestNode}}
					n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
					json.NewEncoder(w).Encode(corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}, Items: []corev1.Node{n}})
					if tc.late && listings == 1 {
						csrs = append(csrs, serving) // the kubelet asks right after its Node is Ready
					}
				case r.Method == http.MethodGet && r.URL.Path == "/apis/certificates.k8s.io/v1/certificatesigningrequests":
					items := []any{}
					for _, x := range csrs {
						items = append(items, joinTestObject(t, x))
					}
					json.NewEncoder(w).Encode(map[string]any{"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequestList", "metadata": map[string]any{}, "items": items})
				case r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/approval"):
					approvals++
					var body map[string]any
					json.NewDecoder(r.Body).Decode(&body)
					for i := range csrs {
						if strings.HasSuffix(r.URL.Path, "/"+csrs[i].Name+"/approval") {
							csrs[i] = joinTestCSR(t, csrs[i].Name, true, true)
						}
					}
					json.NewEncoder(w).Encode(body)
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			w := apiStandinWorld(t, srv.URL)
			w.clock = wait.NewFakeClock(time.Unix(1e9, 0))
			w.interval = func(d time.Duration) time.Duration { return d }
			w.machines = func(uri, cluster string) ClusterMachines { return newFakeMachines(c) }
			clusterEnv = w
			ts := []*engine.Target{clusterStandinFile(adminKubeconfig, "kubeconfig", "apiVersion: v1\nkind: Config\n")}
			for _, x := range clusterTargets(c, func(n string) bool { return n == adminKubeconfig }) {
				if x.Name == "cluster/workers" {
					ts = append(ts, x)
					for _, d := range x.Deps { // cluster/pivot, the workers' installs: done
						if d != adminKubeconfig {
							ts = append(ts, clusterStandinFile(d, "record.json", "{}"))
						}
					}
				}
			}
			var stderr strings.Builder
			if _, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: t.TempDir(), Goals: []string{"cluster/workers"}, Targets: ts, Jobs: 1, Now: time.Now, Stderr: &stderr}); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			mu.Lock()
			defer mu.Unlock()
			if approvals != tc.approvals {
				t.Errorf("%d approvals, want %d: the serving CSR that came after Ready was left pending", approvals, tc.approvals)
			}
			if listings != tc.listings {
				t.Errorf("done after %d node listings, want %d", listings, tc.listings)
			}
		})
	}
}

// joinTestObject is c as the API server lists it (certificates.k8s.io/v1 JSON).
func joinTestObject(t *testing.T, c csr.CertificateSigningRequest) map[string]any {
	b, err := json.Marshal(c)
	if err != nil {
		t.Error(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	m["apiVersion"], m["kind"] = "certificates.k8s.io/v1", "CertificateSigningRequest"
	return m
}
