//go:build !idem_selftest

package fault

import "testing"

// TestPlanted_NeverOutsideTheSelfTestBuild: without -tags idem_selftest a
// planted bug cannot be activated, not even by arming its name the way the
// harness (or GO_FAILPOINTS) would.
func TestPlanted_NeverOutsideTheSelfTestBuild(t *testing.T) {
	for _, name := range constsIn(t, "planted.go") {
		if err := Enable(name, "return(true)"); err != nil {
			t.Fatal(err)
		}
		got := Planted(name)
		Disable(name)
		if got {
			t.Errorf("planted bug %s fired outside the self-test build", name)
		}
	}
}

// TestCheckEnv_PlantedBugsUnknownOutsideTheSelfTestBuild: arming a
// planted bug does nothing here, so GO_FAILPOINTS naming one is refused.
func TestCheckEnv_PlantedBugsUnknownOutsideTheSelfTestBuild(t *testing.T) {
	if err := CheckEnv(BugReexecuteOnReplay + "=return(true)"); err == nil {
		t.Errorf("GO_FAILPOINTS naming planted bug %s passed outside the self-test build", BugReexecuteOnReplay)
	}
}
