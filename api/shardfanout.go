package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

// The routes that name no table ask every store shard (docs/cluster.md
// "Shards"): the table list merges the shards' pages by name, the receipt
// listing walks the shards one after another, and a resolve by
// transaction ID asks each shard until one holds the receipt. With one
// shard each is exactly the single service's answer.

// listAllTables is a page of the caller's tables over every shard, in name
// order: each shard's page after `after`, merged. A (principal, table)
// lives on one shard, so no name comes twice. The page stops at the least
// of the shards' last names among those with more (no unseen table sorts
// before it) and at the limit; next is the last name given when any shard
// has more.
func (s *shardMap) listAllTables(r *http.Request, after string, limit int) ([]table.Meta, string, error) {
	principal := principalOf(r.Context())
	if len(s.shards) == 1 {
		return s.svc.Tables().List(r.Context(), principal, after, limit)
	}
	if limit <= 0 || limit > table.TablesListMax {
		limit = table.TablesListMax
	}
	var all []table.Meta
	bound, more := "", false
	for _, svc := range s.shards {
		ms, next, err := svc.Tables().List(r.Context(), principal, after, limit)
		if err != nil {
			return nil, "", err
		}
		all = append(all, ms...)
		if next != "" && (!more || next < bound) {
			bound, more = next, true
		}
	}
	slices.SortFunc(all, func(a, b table.Meta) int { return strings.Compare(a.Name, b.Name) })
	n := len(all)
	if more {
		n, _ = slices.BinarySearchFunc(all, bound, func(m table.Meta, b string) int { return strings.Compare(m.Name, b) })
		n++ // bound itself is a name given
	}
	if n > limit {
		n, more = limit, true
	}
	all = all[:n]
	next := ""
	if more && len(all) > 0 {
		next = all[len(all)-1].Name
	}
	return all, next, nil
}

// listAllReceipts is a page of the receipt listing over every shard: the
// shards in order, each to its end. On a sharded deployment the cursor is
// the shard's index (one byte) then that shard's own cursor; a page ends
// at a shard's end, its cursor naming the next shard's start.
func (s *shardMap) listAllReceipts(ctx context.Context, f receipt.ListFilter) (receipt.ListPage, error) {
	if len(s.shards) == 1 {
		return s.svc.List(ctx, f)
	}
	k := 0
	if len(f.After) > 0 {
		k, f.After = int(f.After[0]), f.After[1:]
		if len(f.After) == 0 {
			f.After = nil // the shard's start
		}
		if k >= len(s.shards) {
			return receipt.ListPage{}, receipt.ErrBadCursor
		}
	}
	page, err := s.shards[k].List(ctx, f)
	if err != nil {
		return page, err
	}
	switch {
	case page.Next != nil:
		page.Next = append([]byte{byte(k)}, page.Next...)
	case k+1 < len(s.shards):
		page.Next = []byte{byte(k + 1)}
	}
	return page, nil
}

// resolveAny resolves the receipt of txn id on the shard that holds it:
// a transaction ID does not name its table, so each shard is asked in
// turn; store.ErrNotFound when none has it.
func (s *shardMap) resolveAny(ctx context.Context, id, by string) (receipt.Resolution, error) {
	for _, svc := range s.shards {
		res, err := svc.Resolve(ctx, id, by)
		if !errors.Is(err, store.ErrNotFound) {
			return res, err
		}
	}
	return receipt.Resolution{}, store.ErrNotFound
}
