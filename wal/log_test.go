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
