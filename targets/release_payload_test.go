package targets

import (
	"fmt"
	"testing"

	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/releases"
)

// TestReleaseRowNames: lab's derived.release spells render/releases' row names (lab may not
// import render/): every supported row, and the unsupported names Lookup refuses.
func TestReleaseRowNames(t *testing.T) {
	for _, r := range releases.Supported {
		for _, patch := range []string{"0", "7", "0-rc.1"} {
			c := lab.DefaultConfig()
			v := fmt.Sprintf("%d.%d.%s", r.Major, r.Minor, patch)
			if r.OKD {
				v += "-okd-scos.1"
			}
			if err := c.SetPayload(v, r.OKD); err != nil {
				t.Fatal(err)
			}
			if got, want := c.ReleaseRow(), releases.RowName(v, r.OKD); got != want || got != r.Name {
				t.Errorf("%s: lab's row %q, releases.RowName %q, row %q", v, got, want, r.Name)
			}
		}
	}
	c := lab.DefaultConfig()
	c.SetPayload("4.16.3", false)
	if got := c.ReleaseRow(); got != releases.RowName("4.16.3", false) {
		t.Errorf("4.16.3: %q", got)
	}
}
