package receipt

import (
	"bytes"
	"context"

	"github.com/idemdb/idem/store"
)

// scanAround is Scan of at most n keys in [start, end), except that a key
// whose value does not read (store.DamagedKey: damaged on disk) does not
// fail it: the key is answered in damaged, and the scan goes on past it.
// A walk of an index (the cleaner's, a listing) thus skips what an
// operator must repair (idemctl check names it) instead of stopping there
// for good. last is the last key walked when n were, nil when the range
// ended first.
func scanAround(ctx context.Context, st store.Store, start, end []byte, n int) (items []store.Item, damaged [][]byte, last []byte, err error) {
	for {
		want := n - len(items) - len(damaged)
		got, err := st.Scan(ctx, start, end, want)
		bad, isBad := store.DamagedKey(err)
		if err != nil && !isBad {
			return nil, nil, nil, err
		}
		if !isBad {
			items = append(items, got...)
			if len(got) < want {
				return items, damaged, nil, nil
			}
			return items, damaged, items[len(items)-1].Key, nil
		}
		// Values are read in key order, so the first key that fails is
		// the first damaged one: what precedes it reads.
		if got, err = st.Scan(ctx, start, bad, want); err != nil {
			return nil, nil, nil, err
		}
		items = append(items, got...)
		if len(got) == want {
			return items, damaged, items[len(items)-1].Key, nil
		}
		damaged = append(damaged, bad)
		if len(items)+len(damaged) == n {
			return items, damaged, bad, nil
		}
		start = append(bytes.Clone(bad), 0)
	}
}
