package lease

import (
	"errors"

	"github.com/idemdb/idem/store"
)

var (
	// ErrFenced means another owner holds the receipt now: the write carried a
	// condition on a claim version that is no longer current.
	ErrFenced = errors.New("lease: fenced: the receipt has another owner")
	// ErrUncertain means a lease could not be confirmed before it ran out:
	// whether a write under it would still be ours is unknown. It is
	// store.ErrAmbiguous too (store.Kind); its own name tells the cause.
	ErrUncertain = store.Kind("lease: ownership uncertain", store.ErrAmbiguous)
)

// Internal sentinels (held.go).
var (
	// errUnconfirmed: Fence was asked for a claim whose version is not
	// known yet (Resync first).
	errUnconfirmed = errors.New("lease: claim version unconfirmed")
	// errPublishing: Resync left a claim alone whose publication is still
	// in flight; its writer settles it.
	errPublishing = errors.New("lease: claim publication in flight")
)
