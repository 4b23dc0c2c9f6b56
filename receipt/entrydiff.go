package receipt

import (
	"encoding/binary"

	"github.com/idemdb/idem/table"
)

// A 422 key mismatch says which entries of the batch differ from the
// request the key is bound to — changed, added or removed — without the
// receipt keeping that request: it keeps the entries' digests
// and how many each list had (table.EntryDigests, Record.Entries). Entries are matched by their list and ID digest, so an
// entry that moved is not a difference; what the digests cannot locate
// (beyond table.EntryDigestsMax entries, or a digest collision) makes the
// diff incomplete, never wrong about what it names.

// EntryDiff is one entry that differs.
type EntryDiff struct {
	Change string // EntryChanged, EntryAdded or EntryRemoved
	List   string // table.ListInserts, ListDeletes or ListTransforms
	// Index is the entry's place in its list: in this request (changed,
	// added) or in the original (removed).
	Index int
	// ID is the entry's document ID ("" for a removed entry: the
	// original's IDs are not kept).
	ID string
}

// Diff is what a mismatch found.
type Diff struct {
	Entries []EntryDiff
	// Complete says Entries are every difference: false when one side had
	// more entries than were digested, when Entries was cut at
	// DiffEntriesMax, or when the digests agree although the fingerprints
	// do not.
	Complete bool
}

// The changes an EntryDiff names.
const (
	EntryChanged = "changed"
	EntryAdded   = "added"
	EntryRemoved = "removed"
)

// DiffEntriesMax bounds the entries a mismatch names.
const DiffEntriesMax = 32

var listNames = [...]string{table.ListInserts, table.ListDeletes, table.ListTransforms}

// entryAt is the list and index of entry i given the lists' counts.
func entryAt(lists [3]int, i int) (string, int) {
	for l, n := range lists {
		if i < n {
			return listNames[l], i
		}
		i -= n
	}
	return "", -1
}

// diffEntries compares batch b with the original's entry digests
// (Record.Entries); nil when the original kept none (a receipt written
// before digests, or a session's commit).
func diffEntries(kept []byte, b *table.Batch) *Diff {
	origLists, orig, ok := table.ParseEntryDigests(kept)
	if len(kept) == 0 || !ok || b == nil {
		return nil
	}
	_, mine, _ := table.ParseEntryDigests(b.EntryDigests())
	known := len(orig) / table.EntryDigestBytes
	origN := 0
	for _, n := range origLists {
		origN += n
	}
	d := &Diff{Complete: known == origN && b.Entries() <= table.EntryDigestsMax}
	matched := make([]bool, known)
	add := func(e EntryDiff) {
		if len(d.Entries) == DiffEntriesMax {
			d.Complete = false
			return
		}
		d.Entries = append(d.Entries, e)
	}
	for j := 0; j < len(mine)/table.EntryDigestBytes; j++ {
		dj := mine[j*table.EntryDigestBytes:][:table.EntryDigestBytes]
		list, index, id := b.Entry(j)
		i := matchEntry(orig, matched, dj, j)
		switch {
		case i >= 0 && binary.BigEndian.Uint32(orig[i*table.EntryDigestBytes+2:]) == binary.BigEndian.Uint32(dj[2:]):
		case i >= 0:
			add(EntryDiff{Change: EntryChanged, List: list, Index: index, ID: id})
		case known == origN:
			add(EntryDiff{Change: EntryAdded, List: list, Index: index, ID: id})
		}
	}
	for i, m := range matched {
		if !m {
			list, index := entryAt(origLists, i)
			add(EntryDiff{Change: EntryRemoved, List: list, Index: index})
		}
	}
	if len(d.Entries) == 0 {
		d.Complete = false // the fingerprints differ; the digests cannot say where
	}
	return d
}

// matchEntry finds the original entry with digest dj's list and ID, not
// matched yet — the one at position j if it is one — and marks it; -1 if
// there is none.
func matchEntry(orig []byte, matched []bool, dj []byte, j int) int {
	id := binary.BigEndian.Uint16(dj)
	at := func(i int) bool {
		return !matched[i] && binary.BigEndian.Uint16(orig[i*table.EntryDigestBytes:]) == id
	}
	if j < len(matched) && at(j) {
		matched[j] = true
		return j
	}
	for i := range matched {
		if at(i) {
			matched[i] = true
			return i
		}
	}
	return -1
}
