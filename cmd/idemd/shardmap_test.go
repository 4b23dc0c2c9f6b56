package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
)

// writeMap writes a shard map file and returns its path.
func writeMap(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "shards.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const twoShards = `{"version": 3, "shards": [
	{"name": "a", "endpoints": ["127.0.0.1:2379"]},
	{"name": "b", "endpoints": ["127.0.0.1:2479", "http://127.0.0.1:2480"], "prefix": "/idem-b/", "ca": "ca.pem", "user": "u", "password_file": "/p"}]}`

// TestParseFlags_EtcdShards: a map is read whole (defaults applied,
// relative files resolved against its directory); a map that breaks a rule
// of the -etcd-* flags, or comes with the flags it replaces, is a usage
// error naming the file, the shard and the rule.
func TestParseFlags_EtcdShards(t *testing.T) {
	etcd := []string{"-store", "etcd", "-advertise", "http://127.0.0.1:8420"}
	p := writeMap(t, twoShards)
	c, err := parseFlags(append(etcd, "-etcd-shards", p), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.shardMap == nil || c.shardMap.Version != 3 || len(c.targets) != 2 || c.targets[0].Prefix != "/idem/" ||
		c.targets[1].Prefix != "/idem-b/" || c.targets[1].CA != filepath.Join(filepath.Dir(p), "ca.pem") || c.targets[1].Password != "/p" {
		t.Fatalf("parsed %+v %+v", c.shardMap, c.targets)
	}
	c, err = parseFlags(append(etcd, "-etcd-endpoints", "127.0.0.1:2379"), io.Discard)
	if err != nil || c.shardMap != nil || len(c.targets) != 1 || c.targets[0].Prefix != "/idem/" {
		t.Fatalf("without -etcd-shards: one target, no map: %+v %v", c.targets, err)
	}
	for _, bad := range []struct{ body, want string }{
		{`{"shards": [{"name": "a", "endpoints": ["h:1"]}]}`, "version 0: must be at least 1"},
		{`{"version": 1, "shards": []}`, "0 shards: must be 1..256"},
		{`{"version": 1, "shards": [{"name": "a", "endpoints": ["h:1"]}, {"name": "a", "endpoints": ["h:2"]}]}`, `shard 1: name "a" must be unique`},
		{`{"version": 1, "shards": [{"name": "a/b", "endpoints": ["h:1"]}]}`, `name "a/b" must be unique, 1..64 of A-Z`},
		{`{"version": 1, "shards": [{"name": "a", "endpoints": []}]}`, `shard "a": endpoints: needs 1..16`},
		{`{"version": 1, "shards": [{"name": "a", "endpoints": ["h"]}]}`, `shard "a": endpoints: "h" must be host:port`},
		{`{"version": 1, "shards": [{"name": "a", "endpoints": ["h:1"], "prefix": "/x"}]}`, `prefix "/x": must end in '/'`},
		{`{"version": 1, "shards": [{"name": "a", "endpoints": ["h:1"], "cert": "c"}]}`, "cert and key: give both or neither"},
		{`{"version": 1, "shards": [{"name": "a", "endpoints": ["h:1"], "cert": "c", "key": "k"}]}`, "needs TLS: give ca too"},
		{`{"version": 1, "shards": [{"name": "a", "endpoints": ["h:1"], "user": "u"}]}`, "user and password_file: give both or neither"},
		{`{"version": 1, "shards": [{"name": "a", "endpoints": ["h:1"], "endpoint": "h:2"}]}`, `unknown field "endpoint"`},
	} {
		_, err := parseFlags(append(etcd, "-etcd-shards", writeMap(t, bad.body)), io.Discard)
		if _, usage := err.(*usageError); !usage || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "-etcd-shards ") {
			t.Errorf("map %s: %v, want a usage error with %q", bad.body, err, bad.want)
		}
	}
	if _, err := parseFlags(append(etcd, "-etcd-shards", p, "-etcd-endpoints", "h:1"), io.Discard); err == nil ||
		!strings.Contains(err.Error(), "-etcd-endpoints: not with -etcd-shards") {
		t.Errorf("-etcd-shards with -etcd-endpoints: %v", err)
	}
	if _, err := parseFlags([]string{"-etcd-shards", p}, io.Discard); err == nil || !strings.Contains(err.Error(), "-etcd-shards: only with -store etcd") {
		t.Errorf("-etcd-shards on the local store: %v", err)
	}
}

// TestShardMap_DigestCoversPlacementOnly: the digest changes with the
// version, K, a name, a prefix or the order, and not with a node's way to
// a cluster (endpoints, TLS, auth).
func TestShardMap_DigestCoversPlacementOnly(t *testing.T) {
	base := func() *shardMap {
		return &shardMap{Version: 1, Shards: []etcdTarget{{Name: "a", Prefix: "/i/", Endpoints: []string{"h:1"}}, {Name: "b", Prefix: "/i/", Endpoints: []string{"h:2"}}}}
	}
	d := base().digest()
	same := base()
	same.Shards[0].Endpoints, same.Shards[0].CA, same.Shards[1].User = []string{"other:9"}, "/ca", "u"
	if same.digest() != d {
		t.Error("the digest moved with endpoints, TLS or auth")
	}
	for name, change := range map[string]func(m *shardMap){
		"version": func(m *shardMap) { m.Version = 2 },
		"K":       func(m *shardMap) { m.Shards = m.Shards[:1] },
		"name":    func(m *shardMap) { m.Shards[1].Name = "c" },
		"prefix":  func(m *shardMap) { m.Shards[0].Prefix = "/j/" },
		"order":   func(m *shardMap) { m.Shards[0], m.Shards[1] = m.Shards[1], m.Shards[0] },
	} {
		m := base()
		change(m)
		if m.digest() == d {
			t.Errorf("the digest did not move with the %s", name)
		}
	}
}

// recordConfig is a config with map m on len(m.Shards) stores.
func recordConfig(m *shardMap) config {
	return config{shardMap: m, targets: m.Shards, etcdDialTimeout: 5 * time.Second}
}

func mapOf(version uint64, names ...string) *shardMap {
	m := &shardMap{Version: version}
	for _, n := range names {
		m.Shards = append(m.Shards, etcdTarget{Name: n, Prefix: "/idem/"})
	}
	return m
}

// TestShardRecords_RefuseAnotherMap: the first start records the map in
// every shard; the same map starts again; another map (another version,
// K, order, or none where K > 1) is refused while the deployment holds
// data, and a higher version is taken while it holds none.
func TestShardRecords_RefuseAnotherMap(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, b, c := memstore.New(), memstore.New(), memstore.New()
	on := func(stores ...*memstore.Store) []*servedStore {
		var out []*servedStore
		for _, s := range stores {
			out = append(out, &servedStore{store: s})
		}
		return out
	}
	v1 := mapOf(1, "a", "b")
	if err := checkShardRecords(ctx, recordConfig(v1), on(a, b), log); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if err := checkShardRecords(ctx, recordConfig(v1), on(a, b), log); err != nil {
		t.Fatalf("the same map again: %v", err)
	}
	for name, cse := range map[string]struct {
		m      *shardMap
		stores []*servedStore
		want   string
	}{
		"same version, other shards": {mapOf(1, "a", "c"), on(a, c), "is not the deployment's"},
		"swapped clusters":           {mapOf(1, "a", "b"), on(b, a), "is not the deployment's"},
		"lower version":              {mapOf(0, "a", "b"), on(a, b), "is not the deployment's"},
	} {
		if err := checkShardRecords(ctx, recordConfig(cse.m), cse.stores, log); err == nil || !strings.Contains(err.Error(), cse.want) {
			t.Errorf("%s: %v, want %q", name, err, cse.want)
		}
	}
	if err := checkShardRecords(ctx, config{etcdDialTimeout: time.Second}, on(a), log); err == nil || !strings.Contains(err.Error(), "start every node with that map's -etcd-shards") {
		t.Errorf("no map on a sharded deployment: %v", err)
	}
	// Empty: a higher version adding a shard is taken, and recorded.
	v2 := mapOf(2, "a", "b", "c")
	if err := checkShardRecords(ctx, recordConfig(v2), on(a, b, c), log); err != nil {
		t.Fatalf("a new map on an empty deployment: %v", err)
	}
	if err := checkShardRecords(ctx, recordConfig(v1), on(a, b), log); err == nil {
		t.Fatal("the old map after the new one was taken: started")
	}
	// Holding data: no new map, however high its version.
	if _, err := b.Apply(ctx, new(store.Batch).Put(store.NSReceipt.Key("x"), []byte("r"))); err != nil {
		t.Fatal(err)
	}
	if err := checkShardRecords(ctx, recordConfig(mapOf(3, "a", "b", "c")), on(a, b, c), log); err == nil || !strings.Contains(err.Error(), `shard 1 ("b") holds data`) {
		t.Fatalf("a new map on a deployment holding data: %v", err)
	}
	// A store served unsharded, holding data, cannot become a shard of
	// several.
	d, e := memstore.New(), memstore.New()
	if _, err := d.Apply(ctx, new(store.Batch).Put(store.NSTable.Key("t", "0", "doc"), []byte("{}"))); err != nil {
		t.Fatal(err)
	}
	if err := checkShardRecords(ctx, recordConfig(mapOf(1, "d", "e")), on(d, e), log); err == nil || !strings.Contains(err.Error(), "records no shard map") {
		t.Fatalf("sharding a deployment that holds data: %v", err)
	}
}
