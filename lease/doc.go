// Package lease decides who may finish a receipt (docs/design.md §7): owner identity
// and incarnation, per-receipt claims fenced by CAS, lease expiry, the shared
// deadline-aware heartbeat, the active set and the renewal supervisor.
//
// Safety never depends on clocks: every write by an owner carries a
// condition on the version of the receipt's claim key, so a stale owner's
// write fails with ErrFenced. Clocks only decide when a successor may adopt.
package lease
