package receipt

import (
	"github.com/idemdb/idem/store"
)

// dropFailed answers a batch over many items (decisions to release,
// receipts to clean) that failed one item's condition: the items without
// the failed key, to retry. ok is false when err names no key or no item
// owns it, so that retrying could only fail the same way.
func dropFailed[T any](err error, items []T, owns func(key []byte, item T) bool) (kept []T, ok bool) {
	key, named := store.FailedKey(err)
	if !named {
		return items, false
	}
	kept = items[:0]
	for _, it := range items {
		if !owns(key, it) {
			kept = append(kept, it)
		}
	}
	return kept, len(kept) < len(items)
}
