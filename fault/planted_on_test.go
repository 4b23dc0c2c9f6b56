//go:build idem_selftest

package fault

import "testing"

// TestSelfTest_PlantedCatalog: PlantedCatalog documents exactly the planted
// bugs of planted.go, and in the self-test build a planted bug fires only
// while armed.
func TestSelfTest_PlantedCatalog(t *testing.T) {
	bugs := map[string]bool{}
	for _, name := range constsIn(t, "planted.go") {
		bugs[name] = true
	}
	seen := map[string]bool{}
	for _, p := range PlantedCatalog {
		if seen[p.Name] {
			t.Errorf("planted bug %q listed twice", p.Name)
		}
		seen[p.Name] = true
		if !bugs[p.Name] {
			t.Errorf("PlantedCatalog lists %q, which planted.go does not declare", p.Name)
		}
		if p.Layer != "bug" || p.Where == "" || p.Simulates == "" {
			t.Errorf("planted bug %q is not documented in the bug layer", p.Name)
		}
	}
	for name := range bugs {
		if !seen[name] {
			t.Errorf("planted bug %q is not in PlantedCatalog", name)
		}
	}
	if !Compiled {
		t.Skip("failpoints compiled out: nothing can arm a planted bug")
	}
	for _, p := range PlantedCatalog {
		if Planted(p.Name) {
			t.Fatalf("unarmed planted bug %s fired", p.Name)
		}
		if err := Enable(p.Name, "return(true)"); err != nil {
			t.Fatal(err)
		}
		armed := Planted(p.Name)
		Disable(p.Name)
		if !armed || Planted(p.Name) {
			t.Fatalf("planted bug %s: armed %v, after Disable %v; want true, false", p.Name, armed, Planted(p.Name))
		}
	}
}

// TestCheckEnv_PlantedBugsKnownInTheSelfTestBuild: here GO_FAILPOINTS may
// arm a planted bug.
func TestCheckEnv_PlantedBugsKnownInTheSelfTestBuild(t *testing.T) {
	for _, p := range PlantedCatalog {
		if err := CheckEnv(p.Name + "=return(true)"); err != nil {
			t.Errorf("planted bug %s refused in the self-test build: %v", p.Name, err)
		}
	}
}
