package twopc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
	"github.com/idemdb/idem/twopc"
)

// callStore is memstore with each write call noted ("apply" or "chain/n"),
// and chains (made link by link: what counts here is which call the
// applier makes) when chains is set.
type callStore struct {
	store.Store
	chains bool
	calls  []string
}

func (s *callStore) Capabilities() store.Capabilities {
	if s.chains {
		return store.Capabilities{Chain: s}
	}
	return store.Capabilities{}
}

func (s *callStore) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	s.calls = append(s.calls, "apply")
	return s.Store.Apply(ctx, b)
}

func (s *callStore) ApplyChain(ctx context.Context, links ...*store.Batch) ([]store.Version, error) {
	s.calls = append(s.calls, fmt.Sprintf("chain/%d", len(links)))
	var vs []store.Version
	for _, b := range links {
		v, err := s.Store.Apply(ctx, b)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// put is a step that writes key, created if absent.
func put(name, key string, linked bool) twopc.Step {
	k := []byte(key)
	return twopc.Step{Name: name, Batch: new(store.Batch).Absent(k).Put(k, []byte(name)), Linked: linked}
}

// TestApplySteps_ByTheStoresCapabilities: linked steps are one chain on a
// store that chains and one Apply each, in order, on one that does not; a
// lone Chain step is a chain of one where the store chains.
func TestApplySteps_ByTheStoresCapabilities(t *testing.T) {
	lone := put("lone", "c", false)
	lone.Chain = true
	steps := []twopc.Step{put("a", "a", false), put("b", "b", true), lone}
	for _, c := range []struct {
		chains bool
		want   []string
	}{
		{true, []string{"chain/2", "chain/1"}},
		{false, []string{"apply", "apply", "apply"}},
	} {
		st := &callStore{Store: memstore.New(), chains: c.chains}
		vs, err := twopc.ApplySteps(context.Background(), st, steps)
		if err != nil || len(vs) != len(steps) || !slices.Equal(st.calls, c.want) {
			t.Fatalf("chains=%v: versions %v (%v), calls %v; want %d versions, calls %v", c.chains, vs, err, st.calls, len(steps), c.want)
		}
		if !slices.IsSorted(vs) || vs[0] == 0 {
			t.Fatalf("chains=%v: versions %v, want increasing, in the steps' order", c.chains, vs)
		}
	}
}

// TestApplySteps_AFailedStepIsTheStoresErrorAfterTheStepsWritten: a step
// whose condition fails stops the plan with the store's own
// *ConditionError, and the versions returned are those of the steps
// written before it; on a store that chains, a chain's failure writes
// none of its links.
func TestApplySteps_AFailedStepIsTheStoresErrorAfterTheStepsWritten(t *testing.T) {
	for _, chains := range []bool{false, true} {
		st := &callStore{Store: memstore.New(), chains: chains}
		if _, err := st.Store.Apply(context.Background(), new(store.Batch).Put([]byte("b"), []byte("there"))); err != nil {
			t.Fatal(err)
		}
		steps := []twopc.Step{put("x", "x", false), put("a", "a", false), put("b", "b", true), put("z", "z", false)}
		vs, err := twopc.ApplySteps(context.Background(), st, steps)
		var ce *store.ConditionError
		if !errors.As(err, &ce) || string(ce.Cond.Key) != "b" {
			t.Fatalf("chains=%v: %v, want b's *store.ConditionError", chains, err)
		}
		wantWritten := 2 // x, then a apart
		if chains {
			wantWritten = 1 // x: a chain's error covers every link of it
		}
		if len(vs) != wantWritten {
			t.Fatalf("chains=%v: %d versions, want %d", chains, len(vs), wantWritten)
		}
		if _, err := st.Store.Get(context.Background(), []byte("z")); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("chains=%v: the step after the failed one was written (%v)", chains, err)
		}
	}
}

// TestApplySteps_ObserverSeesThePlanBeforeItIsWritten: ObserveSteps hands
// the steps over, named and linked, before the first write.
func TestApplySteps_ObserverSeesThePlanBeforeItIsWritten(t *testing.T) {
	st := &callStore{Store: memstore.New()}
	var seen []string
	ctx := twopc.ObserveSteps(context.Background(), func(steps []twopc.Step) {
		for _, s := range steps {
			seen = append(seen, fmt.Sprintf("%s/%v/%d", s.Name, s.Linked, len(st.calls)))
		}
	})
	if _, err := twopc.ApplySteps(ctx, st, []twopc.Step{put("a", "a", false), put("b", "b", true)}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/false/0", "b/true/0"}; !slices.Equal(seen, want) {
		t.Fatalf("observed %v, want %v", seen, want)
	}
}

// TestApplySteps_RefusesToChangeADecidedRecord: the decided-record check
// of every batch this package writes holds for ApplySteps' too.
func TestApplySteps_RefusesToChangeADecidedRecord(t *testing.T) {
	st := &callStore{Store: memstore.New()}
	defer func() {
		if recover() == nil || len(st.calls) != 0 {
			t.Fatalf("a decision put unconditioned was not refused before any write (calls %v)", st.calls)
		}
	}()
	bad := new(store.Batch).Put(store.NSTxn.Key("dec", "t1"), []byte("x"))
	_, _ = twopc.ApplySteps(context.Background(), st, []twopc.Step{put("a", "a", false), {Name: "bad", Batch: bad}})
}
