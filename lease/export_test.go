package lease

import "github.com/idemdb/idem/store"

// IsFence reports whether err is a failed condition on id's claim key, i.e.
// the write was fenced. Only the fencing tests of package lease_test ask,
// so it lives beside them.
func IsFence(err error, id string) bool {
	key, ok := store.FailedKey(err)
	return ok && string(key) == string(ClaimKey(id))
}
