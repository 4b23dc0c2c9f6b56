package engine

import (
	"bytes"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/idemdb/idem/vfs"
)

// TestReadImage_ReadsTheWholeFileIntoAdvisedMemory: a checkpoint file read
// for the tree to alias — smaller than a huge page, or spanning several,
// its size as listed or stale — comes back whole and unchanged; the
// huge-page advice on its buffer is advice only. Mapped instead
// (Options.MapCheckpoints), it comes back the same, and its bytes count
// as mapped.
func TestReadImage_ReadsTheWholeFileIntoAdvisedMemory(t *testing.T) {
	dir := t.TempDir()
	db := &DB{fs: vfs.Default, dir: dir}
	var mapped int64
	for _, n := range []int{0, 1, 2<<20 - 1, 3<<21 + 12345} { // about huge pages of 2 MiB
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(i*7 + i>>13)
		}
		name := "image"
		if err := vfs.WriteFileSynced(db.fs, filepath.Join(dir, name), want, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, mapIt := range []bool{false, true} {
			for _, listed := range []int64{int64(n), int64(n / 2), int64(n) + 4096} {
				got, err := db.readImage(name, listed, mapIt)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%d bytes listed as %d, mapped %v: read %d bytes, equal %v, err %v", n, listed, mapIt, len(got), bytes.Equal(got, want), err)
				}
			}
		}
		mapped += int64(3 * n)
	}
	if runtime.GOOS == "linux" && db.mapped.Load() != mapped {
		t.Fatalf("mapped %d bytes, counted %d", mapped, db.mapped.Load())
	}
}
