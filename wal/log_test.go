package wal

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

func TestLog_AppendReplayAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	l, _, err := Open(dir, Options{SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	const n = 500
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := l.Reserve(ctx); err != nil {
				t.Error(err)
				return
			}
			_, c, err := l.Enqueue(KindBatch, []byte(fmt.Sprintf("entry-%04d", i)), nil)
			if err != nil {
				t.Error(err)
				return
			}
			if err := c.Wait(ctx); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, _, err = Open(dir, Options{SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	seen := 0
	if err := l.Replay(1, func(index uint64, kind Kind, body []byte) error {
		seen++
		if uint64(seen) != index || kind != KindBatch {
			return fmt.Errorf("entry %d kind %d at position %d", index, kind, seen)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if seen != n {
		t.Fatalf("replayed %d entries, want %d", seen, n)
	}
	if got := l.NextIndex(); got != n+1 {
		t.Fatalf("next index %d, want %d", got, n+1)
	}
}

// TestLog_ReserveNIsAllOrNone: a multi-slot reservation that cannot be
// completed before its context ends holds no slot afterwards, and one that
// fits is released entry by entry when its EnqueueAll group is published.
func TestLog_ReserveNIsAllOrNone(t *testing.T) {
	l, _ := openLogT(t, t.TempDir(), Options{QueueEntriesMax: 4})
	ctx := context.Background()
	for range 3 {
		if err := l.Reserve(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.ReserveN(cancelled, 2); err == nil {
		t.Fatal("ReserveN(2) with 1 of 4 slots free succeeded")
	}
	if err := l.ReserveN(ctx, 5); err == nil {
		t.Fatal("ReserveN beyond QueueEntriesMax succeeded")
	}
	l.UnreserveN(3)
	if got := len(l.slots); got != 0 {
		t.Fatalf("%d slots held after failed reservations were given back", got)
	}
	for round := range 3 { // all four slots, three times: each group gives them back
		if err := l.ReserveN(ctx, 4); err != nil {
			t.Fatal(err)
		}
		entries := make([]Entry, 4)
		for i := range entries {
			entries[i] = Entry{Kind: KindBatch, Body: body(uint64(round*4 + i))}
		}
		first, c, err := l.EnqueueAll(entries)
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(round*4 + 1); first != want || entries[3].Index != want+3 {
			t.Fatalf("round %d: indexes %d..%d, want %d..%d", round, first, entries[3].Index, want, want+3)
		}
		if err := c.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
