package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/idemdb/idem/store"
)

// Dump renders every item of s, in key order, one per line with its
// version: two dumps are equal exactly when the stores hold the same
// state. It pages by s.Limits().ScanItemsMax, so it works on any store.
func Dump(t testing.TB, s store.Store) string {
	t.Helper()
	var sb strings.Builder
	var start []byte
	for {
		items, err := s.Scan(context.Background(), start, nil, s.Limits().ScanItemsMax)
		if err != nil {
			t.Fatalf("dump: %v", err)
		}
		for _, it := range items {
			fmt.Fprintf(&sb, "%s@%d=%x\n", it.Key, it.Version, it.Value)
		}
		if len(items) < s.Limits().ScanItemsMax {
			return sb.String()
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
}
