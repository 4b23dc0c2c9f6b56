// Package etcdstore (directory store/etcd) is a store.Store on etcd:
// receipts, leases and tables replicated by a Raft cluster instead of one
// node's log. Its name is etcdstore, not etcd, because its importers
// (idemd, idemctl, etcdtest, the bench) also use etcd's own packages, where
// a bare etcd would read as etcd itself; it is imported by that name.
//
// # The mapping
//
// Apply is one etcd Txn. Its conditions become Compares — absent is
// CreateRevision = 0, present CreateRevision > 0, at-version ModRevision =
// v — and its ops become Puts and Deletes in the Then branch. A Version is
// etcd's ModRevision: every key a Txn writes carries the Txn's revision,
// and revisions increase across the cluster, so the contract's "one batch,
// one version, strictly increasing" is etcd's own. Get and Scan are
// linearizable Range requests; a Scan is one ranged Get with a limit, read
// at one revision, so it is a point-in-time view; GetMany
// (store.MultiGetter) reads several keys in one read-only Txn.
//
// Every key sits under Options.Prefix, so several deployments share one
// etcd cluster without seeing each other's keys.
//
// # What etcd refuses that engine.DB accepts
//
// A Txn may not put the same key twice, nor put and delete it: Apply keeps
// only the last op on each key, which is what the contract's "a later op
// wins" means anyway. A Txn holds at most --max-txn-ops operations per
// branch (128 by default) and a request at most --max-request-bytes (1.5
// MiB): Limits says so and the layers above size their batches from it.
//
// # Which condition failed
//
// The Else branch reads every condition's key, so a Txn whose Compares
// fail returns, in the same round trip and at the same revision, what it
// found; Apply reports the first failed condition from that, as engine.DB
// does, without a second read that could see a later state.
//
// # Ambiguity
//
// etcd can commit a Txn whose caller got an error: a leader that stops
// after proposing, a deadline that ends while the entry replicates. Only
// the rejections etcd makes before proposing — too many ops, request too
// large, duplicate key, no space, authentication — mean "not applied";
// every other error is store.ErrAmbiguous. Apply never resends a Txn: a
// resend of one whose first try committed would see its own writes and
// report a false condition failure. Instead every value carries a write
// nonce (value.go), and after an ambiguous error Apply reads the batch's
// first put back: finding its own nonce proves the batch committed, at the
// key's ModRevision. Not finding it proves nothing — the Txn may still be
// in a leader's log — so the answer stays ErrAmbiguous and the layers above
// treat the batch as pending, as they do on the local store.
//
// # Group commit
//
// While several Txns are in flight, further Applies queue and go as one
// Txn of nested sub-Txns, each with its own Compares and outcome, no two
// touching a key one of them writes (group.go).
//
// # Fencing
//
// Owner fencing stays in the layers above, as compares inside the same
// Txn as the write. etcd's own leases are not used: their TTLs reset at
// every leader change, and etcd's lock is no fence on its own.
package etcdstore
