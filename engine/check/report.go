package check

import (
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// ProblemKind grades a problem.
type ProblemKind string

const (
	// ProblemDamage: bytes that were acknowledged, or files the store
	// needs, are changed or missing. Recovery refuses, or falls back.
	ProblemDamage ProblemKind = "damage"
	// ProblemTornTail: the last segment ends in a write that a crash cut
	// short — never acknowledged; the next open cuts it, losing nothing.
	ProblemTornTail ProblemKind = "torn-tail"
	// ProblemNote: worth knowing, not wrong (files kept by earlier
	// recoveries, an interrupted checkpoint, files that are not the engine's).
	ProblemNote ProblemKind = "note"
)

// OffsetUnknown is a Problem's Offset when no byte offset is known.
const OffsetUnknown = -1

// Problem is one finding of Dir.
type Problem struct {
	File   string      `json:"file"`   // relative to the data dir ("" for the dir as a whole)
	Offset int64       `json:"offset"` // byte offset in File, OffsetUnknown if not known
	Kind   ProblemKind `json:"kind"`
	Detail string      `json:"detail"`
}

// Report is what Dir found.
type Report struct {
	Dir         string           `json:"dir"`
	WAL         Log              `json:"wal"`
	Checkpoints []CheckpointFile `json:"checkpoints"`
	// Chain is the checkpoint chain an open would load, as the files say;
	// nil if none (an open replays the whole log, or refuses).
	Chain *Chain `json:"chain"`
	// Loaded says the logical load ran: an open accepts the dir, and the
	// counts below are the state it builds.
	Loaded     bool             `json:"loaded"`
	Recovery   Recovery         `json:"recovery"`
	Namespaces []NamespaceCount `json:"namespaces"`
	Keys       int64            `json:"keys"`
	Bytes      int64            `json:"bytes"` // keys and values
	// StrayKeys lie outside every registered namespace: nothing the engine
	// writes does, so each is damage.
	StrayKeys  int64 `json:"stray_keys"`
	StrayBytes int64 `json:"stray_bytes"`
	// ValueLog is what the loaded state keeps in the value log.
	ValueLog ValueLog  `json:"value_log"`
	Problems []Problem `json:"problems"`
}

// Log sums up the log.
type Log struct {
	Segments   []Segment       `json:"segments"`
	Frames     uint64          `json:"frames"` // valid frames read
	Batches    uint64          `json:"batches"`
	Records    uint64          `json:"checkpoint_records"` // wal.KindCheckpoint frames
	Bytes      int64           `json:"bytes"`
	FirstIndex uint64          `json:"first_index"`
	LastIndex  uint64          `json:"last_index"`
	Marker     wal.MarkerState `json:"marker"`
}

// Segment is one segment file.
type Segment struct {
	Name   string `json:"name"`
	First  uint64 `json:"first_index"`
	Frames uint64 `json:"frames"`
	Bytes  int64  `json:"bytes"`
}

// CheckpointFile is one checkpoint file and whether it decodes whole.
type CheckpointFile struct {
	Name    string        `json:"name"`
	Kind    string        `json:"kind"`  // "part", "delta" or "legacy"
	Index   store.Version `json:"index"` // a part's generation (v0), a delta's own version
	Seq     int           `json:"seq,omitempty"`
	Base    store.Version `json:"base,omitempty"` // a delta's base generation
	Prev    store.Version `json:"prev,omitempty"` // the link a delta follows
	Last    bool          `json:"last,omitempty"` // a part that ends its generation
	Records uint64        `json:"records"`
	Bytes   int64         `json:"bytes"`
	OK      bool          `json:"ok"`
}

// Chain is a checkpoint chain: a base generation and its deltas.
type Chain struct {
	Base   store.Version `json:"base"`
	Deltas int           `json:"deltas"`
	Tip    store.Version `json:"tip"` // replay starts after it
	Files  []string      `json:"files"`
}

// NamespaceCount is what one namespace holds.
type NamespaceCount struct {
	Namespace store.Namespace `json:"namespace"`
	Keys      int64           `json:"keys"`
	Bytes     int64           `json:"bytes"` // keys and values
}

// Recovery is what the open under Dir did.
type Recovery struct {
	FromCheckpoint  store.Version `json:"from_checkpoint"` // 0: the whole log
	ReplayedEntries int64         `json:"replayed_entries"`
	ReplayedBytes   int64         `json:"replayed_bytes"`
}

// ValueLog sums up the value log as the loaded state uses it.
type ValueLog struct {
	Segments int   `json:"segments"`
	Bytes    int64 `json:"bytes"`
	// Values counts the values the state keeps there, each read back
	// whole; Damaged those that did not read (each is damage).
	Values  int64 `json:"values"`
	Damaged int64 `json:"damaged"`
}

// Damaged reports whether any problem is damage.
func (r *Report) Damaged() bool { return r.Count(ProblemDamage) > 0 }

// Count returns how many problems are of kind k.
func (r *Report) Count(k ProblemKind) int {
	n := 0
	for _, p := range r.Problems {
		if p.Kind == k {
			n++
		}
	}
	return n
}
