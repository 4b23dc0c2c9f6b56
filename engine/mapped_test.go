package engine

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/idemdb/idem/store"
)

// A store whose open maps its chain (Options.MapCheckpoints) holds what
// the same files read hold, and goes on as one: its items, aliasing the
// mapped pages, are written into deltas, merged into a new base and
// overwritten, and every open after finds the same state mapped or read.
// Only the open maps: a merge reads the deltas it did not load.
func TestMapCheckpoints_AMappedChainHoldsAndGoesOnAsARead(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("checkpoints are mapped on linux only")
	}
	dir := t.TempDir()
	read := deltaTestOpts()
	read.CheckpointLogBytes = -(1 << 40) // merges only when the deltas are due
	read.CheckpointDeltasMax = 2
	mapped := read
	mapped.MapCheckpoints = true
	db := openT(t, dir, read)
	write := func(round, keys int) {
		for i := range keys {
			apply(t, db, new(store.Batch).Put(fmt.Appendf(nil, "k%04d", i), fmt.Appendf(nil, "round-%d-%s", round, strings.Repeat("x", i%64))))
		}
		if round%3 == 2 {
			apply(t, db, new(store.Batch).Delete(fmt.Appendf(nil, "k%04d", round)))
		}
	}
	for round := range 3 {
		write(round, 300+100*round)
		checkpointT(t, db)
	}
	for round := 3; round < 9; round++ {
		want := scanAll(t, db)
		db = reopenT(t, db, dir, read)
		sameState(t, fmt.Sprintf("round %d, read", round), scanAll(t, db), want)
		db = reopenT(t, db, dir, mapped)
		sameState(t, fmt.Sprintf("round %d, mapped", round), scanAll(t, db), want)
		rec := db.Stats().Recovery
		if rec.MappedBytes != rec.ChainBytes || rec.ChainBytes == 0 {
			t.Fatalf("round %d: mapped %d bytes of a chain of %d", round, rec.MappedBytes, rec.ChainBytes)
		}
		write(round, 200)
		checkpointT(t, db)
		if err := db.merges.mergeAll(); err != nil {
			t.Fatal(err)
		}
		if got := db.mapped.Load(); got != rec.MappedBytes {
			t.Fatalf("round %d: %d bytes mapped after a checkpoint and a merge, %d at the open", round, got, rec.MappedBytes)
		}
	}
	if merges := db.Stats().Checkpoints.Merges; merges == 0 {
		t.Fatal("no merge ran on a mapped chain")
	}
}
