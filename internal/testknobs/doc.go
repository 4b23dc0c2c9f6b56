// Package testknobs holds the switches that exist only so that tests can
// reach a flow the production configuration never takes: a receipt's
// decision written apart from its Begin, intents left to maintenance.
// They were fields of receipt.Options and twopc.Options; there a host
// could set them and be held to them as API (issue 36, part 3).
//
// The shape: each package that has knobs keeps them in an unexported
// field of its Options and sets that field in one exported function whose
// parameter is a type of this package (receipt.WithTestKnobs,
// twopc.WithTestKnobs). Go's internal rule is by import path, so any
// package under github.com/idemdb/idem — the harness, etcdtest, idemd's
// test flag — may import this one, and no host can: a host can neither
// name these types nor write a value with a knob set by a composite
// literal. (Go's type inference could still hand a determined host a zero
// value whose fields it then sets; that is reaching past the API, not
// using it, and the knobs change only which writes carry the same
// records, never what is stored or answered: docs/design.md §5.)
//
// A knob set is a plain struct rather than a context value or a global:
// tests run in parallel with different knobs, and a service's knobs are
// fixed when it opens.
//
// Files:
//
//	doc.go    this map and the package's reason
//	knobs.go  the knob sets, one per package that reads them
package testknobs
