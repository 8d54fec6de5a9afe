package engine

import "testing"

// TestPlanSummary counts External actions Terraform's way; undecided External runs and file
// targets go to a second sentence.
func TestPlanSummary(t *testing.T) {
	ext := func(a string) PlanItem { return PlanItem{Target: "x", Action: a, External: true} }
	for _, tc := range []struct {
		plan []PlanItem
		want string
	}{
		{nil, ""},
		{[]PlanItem{{Target: "pki/ca", Action: "run"}}, ""},
		{[]PlanItem{ext("create"), ext("create"), ext("create"), ext("update")},
			"Plan: 3 to create, 1 to update in place, 0 to replace, 0 to destroy."},
		{[]PlanItem{ext("replace"), ext("destroy"), ext("restore"), ext("run"), {Target: "ignition/worker-2", Action: "run"}},
			"Plan: 0 to create, 0 to update in place, 1 to replace, 1 to destroy. Then 1 to check again once their upstreams are built; 1 file targets to build."},
	} {
		if got := PlanSummary(tc.plan); got != tc.want {
			t.Errorf("PlanSummary(%v)\n got %q\nwant %q", tc.plan, got, tc.want)
		}
	}
}
