package rehearsal

import "testing"

// TestNodeLabelsPatch: the dropped --node-labels become a merge patch of metadata.labels, a
// label without "=" with the empty value (as the kubelet's flag parses it).
func TestNodeLabelsPatch(t *testing.T) {
	for _, tc := range []struct {
		labels []string
		want   string
	}{
		{[]string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"},
			`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":"","node-role.kubernetes.io/master":""}}}`},
		{[]string{"node-role.kubernetes.io/worker=", "a=b"}, `{"metadata":{"labels":{"a":"b","node-role.kubernetes.io/worker":""}}}`},
	} {
		got, err := nodeLabelsPatch(tc.labels)
		if err != nil || string(got) != tc.want {
			t.Errorf("nodeLabelsPatch(%q) = %s, %v; want %s", tc.labels, got, err, tc.want)
		}
	}
}
