package api

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
)

// Store shards (docs/cluster.md "Shards", docs/design.md §14): a sharded
// deployment is K complete Idem instances, each on its own etcd cluster
// with its own receipt.Service, and the API sends each request to the one
// that owns it. Receipts are keyed by a hash of (principal, table, key),
// so no router below the Service could see the table: the cut is here.
// Every Txn stays inside one shard because each shard is its own Store.

// StoreShardsMax bounds K: a session ID carries its shard in one byte.
const StoreShardsMax = 256

// ShardOf is the shard of (principal, table) among k: the first 8 bytes of
// SHA-256 over the length-prefixed principal and table (each a 4-byte
// big-endian length, then the bytes), as a big-endian integer, mod k.
// Fixed forever for a deployment that holds data: a change moves tables
// away from their receipts (shardroute_test.go pins its values).
func ShardOf(principal, table string, k int) int {
	if k <= 1 {
		return 0
	}
	h := sha256.New()
	var n [4]byte
	for _, s := range []string{principal, table} {
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	sum := h.Sum(nil)
	return int(binary.BigEndian.Uint64(sum[:8]) % uint64(k))
}

// sessionShardOf is the shard a session ID names: its first random byte,
// which receipt.Options.Shard set (see receipt.newSessionID). ok is false
// for an ID that has not the form of one, or names no shard among k.
func sessionShardOf(id string, k int) (int, bool) {
	if k <= 1 {
		return 0, true
	}
	p := len(lease.SessionIDPrefix)
	if !receipt.ValidSessionID(id) {
		return 0, false
	}
	b, err := hex.DecodeString(id[p : p+2])
	if err != nil || int(b[0]) >= k {
		return 0, false
	}
	return int(b[0]), true
}

// shardMap is the store shards' services, in the shard map's order, and
// the routing of a request among them: by (principal, table), by session
// ID, or over every shard for the routes that name no table
// (shardfanout.go).
type shardMap struct {
	// svc is shards[0]: the one service without sharding.
	svc    *receipt.Service
	shards []*receipt.Service
}

// shardFor is the service of the shard of (the request's principal, table).
func (s *shardMap) shardFor(r *http.Request, table string) *receipt.Service {
	return s.shards[ShardOf(principalOf(r.Context()), table, len(s.shards))]
}

// sessionShard is the service of the shard the session ID names; an ID
// that names none is answered 404, as the session would be on any shard.
func (s *shardMap) sessionShard(w http.ResponseWriter, r *http.Request) (*receipt.Service, int, bool) {
	id := r.PathValue("id")
	k, ok := sessionShardOf(id, len(s.shards))
	if !ok {
		writeProblem(w, code.SessionNotFound, fmt.Sprintf("no session %q", id))
		return nil, 0, false
	}
	return s.shards[k], k, true
}

// crossShard refuses a session step on a table of another shard than the
// session's: its commit would have to write two etcd clusters in one Txn.
func (s *shardMap) crossShard(r *http.Request, session int, tables ...string) *code.Error {
	for _, t := range tables {
		if k := ShardOf(principalOf(r.Context()), t, len(s.shards)); k != session {
			return code.Errorf(code.SessionCrossShard,
				"table %q lives on shard %d, this session on shard %d: a session's tables must share one shard (name its first table when it begins, and keep to tables of that shard)", t, k, session)
		}
	}
	return nil
}
