// Package waltest is test support for torn-write tests of the log and of
// the layers above it: where to cut the unsynced bytes a crash left.
// Crashes themselves come from vfs/memfs.
//
// Nothing in a production build imports it.
package waltest

// CutPoints are the cuts a torn-write test tries across n unsynced bytes:
// every stride bytes from 0, and n itself.
func CutPoints(n, stride int) []int {
	var cuts []int
	for keep := 0; keep < n; keep += max(stride, 1) {
		cuts = append(cuts, keep)
	}
	return append(cuts, n)
}

// StatesByCut runs a torn-write scenario once keeping nothing, to learn
// how many bytes its crash leaves unsynced, then once at each of
// CutPoints(unsynced, stride), and counts the states the cuts recovered to.
func StatesByCut(stride int, run func(keep int) (state string, unsynced int)) (seen map[string]int, unsynced int) {
	_, unsynced = run(0)
	seen = map[string]int{}
	for _, keep := range CutPoints(unsynced, stride) {
		state, _ := run(keep)
		seen[state]++
	}
	return seen, unsynced
}

// Total sums a memfs.FS.Unsynced report: the bytes a crash left unsynced.
func Total(unsynced map[string]int) int {
	n := 0
	for _, b := range unsynced {
		n += b
	}
	return n
}
