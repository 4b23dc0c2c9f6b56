package fault

import (
	"errors"
	"testing"
)

func TestInject_FiresOnlyWhileArmedAndCountsHits(t *testing.T) {
	if !Compiled {
		t.Skip("failpoints compiled out")
	}
	name := WALSyncBefore
	if err := Inject(name); err != nil {
		t.Fatalf("unarmed failpoint fired: %v", err)
	}
	before := Hits(name)
	if err := Enable(name, `2*return("eio")`); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		err := Inject(name)
		var inj *Injected
		if !errors.Is(err, ErrInjected) || !errors.As(err, &inj) || inj.Name != name || inj.Value != "eio" {
			t.Fatalf("armed failpoint: %v, want an *Injected for %s with value eio", err, name)
		}
	}
	if err := Inject(name); err != nil {
		t.Fatalf("failpoint fired past its count: %v", err)
	}
	if err := Disable(name); err != nil {
		t.Fatal(err)
	}
	if err := Inject(name); err != nil {
		t.Fatalf("disarmed failpoint fired: %v", err)
	}
	if got := Hits(name) - before; got != 2 {
		t.Fatalf("%d hits, want 2", got)
	}
}

// Disabling a failpoint that is not armed must not disarm the others.
// pingcap/failpoint's Disable returns nil for an already disabled failpoint;
// the seam counts armed names, not calls, so a second Disable cannot drive
// the fast path's counter below the truth.
func TestDisable_TwiceKeepsOtherFailpointsArmed(t *testing.T) {
	if !Compiled {
		t.Skip("failpoints compiled out")
	}
	if err := Enable(WALWriteBefore, `return("x")`); err != nil {
		t.Fatal(err)
	}
	Disable(WALWriteBefore)
	Disable(WALWriteBefore)
	if err := Enable(WALWriteAfter, `return("x")`); err != nil {
		t.Fatal(err)
	}
	defer Disable(WALWriteAfter)
	if err := Inject(WALWriteAfter); !errors.Is(err, ErrInjected) {
		t.Fatalf("armed failpoint did not fire after a double Disable of another: %v", err)
	}
}

// A `pause` (like `sleep` and `off`) injects nothing: once released, the
// caller carries on, and the point still counts as reached.
func TestInject_PauseReleasedInjectsNothing(t *testing.T) {
	if !Compiled {
		t.Skip("failpoints compiled out")
	}
	if err := Enable(WALSyncAfter, "sleep(1)"); err != nil {
		t.Fatal(err)
	}
	before := Hits(WALSyncAfter)
	err := Inject(WALSyncAfter)
	Disable(WALSyncAfter)
	if err != nil {
		t.Fatalf("a released sleep injected %v", err)
	}
	if Hits(WALSyncAfter) != before+1 {
		t.Fatal("the point was not counted as reached")
	}
}
