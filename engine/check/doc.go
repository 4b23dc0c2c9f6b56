// Package check is the offline checker of an engine data dir (engine.DB's
// files): a verification of a stopped dir, as `bbolt check` or `etcdutl
// snapshot status` are for theirs, behind `idemctl check`.
//
// Dir never changes the dir: every read goes through a read-only view
// (readonly.go), and the one thing it takes is the dir's LOCK — the
// engine makes that file at its first open and never removes it, so
// locking it creates nothing, and a running server's dir is refused. Each
// part is checked on its own and every problem found is reported, not
// only the first: the log's segments, frame by frame, with the torn-tail
// rules of repair on open (log.go); every checkpoint file, whole
// (files.go); the chain those files make and whether the log reaches back
// to its tip (chain.go); then the state an open would build, built by the
// engine's own recovery on a copy-on-write view of the dir (view.go),
// counted by namespace (load.go). Recovery tolerates a damaged newest
// link by falling back; Dir reports that fallback as damage, because the
// file checks see what recovery only steps around.
//
// The checker judges the files by the engine's own rules and decoders,
// which package engine exports read-only for it (see engine's doc.go):
// file names, checkpoint and batch decoding, the listing and linking of
// checkpoint chains, the keys an open built. It holds no copy of a
// decoder (docs/design.md §2).
//
// Files:
//
//	check.go     Dir, Options, the dir's lock, the checker's state
//	errors.go    ErrNotDataDir, ErrReadOnly
//	report.go    Report and what it holds: problems, the log, files, chain, counts
//	log.go       the log's segments and entries (wal.Verify)
//	files.go     every checkpoint file, decoded whole
//	chain.go     the chain an open would load, and what it would step around
//	load.go      the logical load: an open on the view, counted by namespace
//	readonly.go  readOnlyFS: every write refused
//	view.go      viewFS: a copy-on-write view recovery writes into
package check
