package memfs

import (
	"maps"
	"path"
	"slices"
)

// image is what a crash left on stable storage: the directory entries each
// directory's last Sync made durable and, for each file reachable through
// them, its durable bytes plus the bytes written since from unsyncedAt on
// (which a Tear may keep in part).
type image struct{ root *imgNode }

type imgNode struct {
	dir              bool
	synced, unsynced []byte
	unsyncedAt       int
	children         map[string]*imgNode
}

// capture records the durable state under n. The live file system is dead
// from now on, so the image may share its slices; Recover copies them.
func capture(root *node) *image { return &image{root: captureNode(root)} }

func captureNode(n *node) *imgNode {
	if n.dir {
		im := &imgNode{dir: true, children: make(map[string]*imgNode, len(n.durable))}
		for name, c := range n.durable {
			im.children[name] = captureNode(c)
		}
		return im
	}
	im := &imgNode{synced: n.synced}
	if !n.cut && n.dirtyFrom < n.dirtyTo {
		// Appended, or overwritten from dirtyFrom on (a preallocated WAL
		// segment is written over its zeros): a crash may keep a part of
		// the new bytes, over the durable ones. A truncation below the
		// durable size is all or nothing here, and we keep nothing of it.
		im.unsynced, im.unsyncedAt = n.data[n.dirtyFrom:n.dirtyTo], n.dirtyFrom
	}
	return im
}

// Tear decides what survives of a file's bytes written after its last
// Sync: given the file's name, the offset where they start (the durable
// size for an append, the first overwritten byte otherwise) and the bytes,
// it returns what the disk kept from that offset on; the durable bytes
// show where it kept nothing. Real file systems keep a prefix of what was
// written, possibly followed by blocks that read as zeros; they never
// invent other bytes.
type Tear func(name string, off int64, unsynced []byte) []byte

// DropUnsynced keeps exactly what was synced.
func DropUnsynced(string, int64, []byte) []byte { return nil }

// KeepUnsynced keeps the first n unsynced bytes of every file (all of them
// if fewer): a write torn n bytes in.
func KeepUnsynced(n int) Tear {
	return func(_ string, _ int64, b []byte) []byte { return b[:min(n, len(b))] }
}

// KeepAll keeps every byte written: the page cache reached the disk, as
// after a process kill (as opposed to a power loss).
func KeepAll(_ string, _ int64, b []byte) []byte { return b }

// ZeroFill keeps the first n unsynced bytes rounded down to a block
// boundary of the file, and the rest of the written length as zeros: a
// file system that made the new size durable before the data (XFS, ext4
// with delayed allocation after some crashes).
func ZeroFill(n int, blockBytes int64) Tear {
	return func(_ string, off int64, b []byte) []byte {
		keep := int64(min(n, len(b)))
		if end := off + keep; blockBytes > 0 {
			keep = max(end-end%blockBytes-off, 0)
		}
		out := make([]byte, len(b))
		copy(out, b[:keep])
		return out
	}
}

// Recover returns the file system a restart after the crash would find,
// with tear deciding the fate of unsynced appends (nil: DropUnsynced). It
// crashes m first if it has not crashed yet. Recover may be called many
// times with different tears; each result is independent and alive.
func (m *FS) Recover(tear Tear) *FS {
	if tear == nil {
		tear = DropUnsynced
	}
	m.mu.Lock()
	m.crashLocked()
	img := m.crashed
	m.mu.Unlock()
	out := New()
	out.root = restore(img.root, "/", tear, &out.used)
	return out
}

func restore(im *imgNode, name string, tear Tear, used *int64) *node {
	if im.dir {
		n := newDir()
		// In name order, so that a seeded tear sees the files in the same
		// order every run.
		for _, child := range slices.Sorted(maps.Keys(im.children)) {
			n.children[child] = restore(im.children[child], path.Join(name, child), tear, used)
		}
		n.sync()
		return n
	}
	data := append([]byte(nil), im.synced...)
	if len(im.unsynced) > 0 {
		kept := tear(name, int64(im.unsyncedAt), im.unsynced)
		if end := im.unsyncedAt + len(kept); end > len(data) {
			data = append(data, make([]byte, end-len(data))...)
		}
		copy(data[im.unsyncedAt:], kept)
	}
	*used += int64(len(data))
	n := &node{mode: 0o640, data: data}
	n.sync()
	return n
}

// Unsynced reports, after a crash, how many bytes each file had appended
// since its last Sync (files with none are left out).
func (m *FS) Unsynced() map[string]int {
	m.mu.Lock()
	img := m.crashed
	m.mu.Unlock()
	out := map[string]int{}
	if img != nil {
		img.root.unsyncedBytes("/", out)
	}
	return out
}

func (im *imgNode) unsyncedBytes(name string, out map[string]int) {
	for child, c := range im.children {
		c.unsyncedBytes(path.Join(name, child), out)
	}
	if len(im.unsynced) > 0 {
		out[name] = len(im.unsynced)
	}
}
