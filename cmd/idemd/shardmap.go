package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/idemdb/idem/api"
)

// The shard map (-etcd-shards FILE; docs/cluster.md "Shards") names the K
// etcd clusters a deployment's tables are spread over, each reached with
// its own endpoints, TLS and auth. It is versioned configuration: every
// node of a deployment reads the same map, and each shard records the
// map's version, K and digest (shardrecord.go), so that a node with
// another map is refused at start.

// shardMapBytesMax bounds the -etcd-shards file: 256 shards of a handful
// of endpoints and paths each fit well within it.
const shardMapBytesMax = 1 << 20

// shardNameBytesMax bounds a shard's name, which labels its metrics.
const shardNameBytesMax = 64

// shardMap is the -etcd-shards file, checked.
type shardMap struct {
	Version uint64       `json:"version"`
	Shards  []etcdTarget `json:"shards"`
}

// etcdTarget is how this node reaches one etcd cluster: a shard of the
// map, or the one cluster of the -etcd-* flags. Name and Prefix say which
// data it is (the digest covers them); the rest is this node's way there,
// which nodes may differ in.
type etcdTarget struct {
	Name      string   `json:"name"`
	Endpoints []string `json:"endpoints"`
	Prefix    string   `json:"prefix,omitempty"`
	CA        string   `json:"ca,omitempty"`
	Cert      string   `json:"cert,omitempty"`
	Key       string   `json:"key,omitempty"`
	User      string   `json:"user,omitempty"`
	Password  string   `json:"password_file,omitempty"`
}

// loadShardMap reads and checks the -etcd-shards file. A shard without a
// prefix takes -etcd-prefix; relative file names are relative to the
// map's own directory, so the map means the same from any working
// directory.
func loadShardMap(path, defaultPrefix string) (*shardMap, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("-etcd-shards %s: %v", path, err)
	}
	if len(raw) > shardMapBytesMax {
		return nil, usagef("-etcd-shards %s: larger than %d bytes", path, shardMapBytesMax)
	}
	var m shardMap
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, usagef(`-etcd-shards %s: must be {"version": n, "shards": [{"name": …, "endpoints": […]}, …]}: %v`, path, err)
	}
	if m.Version < 1 {
		return nil, usagef("-etcd-shards %s: version %d: must be at least 1 (raise it with every change of the map)", path, m.Version)
	}
	if len(m.Shards) < 1 || len(m.Shards) > api.StoreShardsMax {
		return nil, usagef("-etcd-shards %s: %d shards: must be 1..%d", path, len(m.Shards), api.StoreShardsMax)
	}
	names := map[string]bool{}
	for i := range m.Shards {
		sh := &m.Shards[i]
		if !validShardName(sh.Name) || names[sh.Name] {
			return nil, usagef("-etcd-shards %s: shard %d: name %q must be unique, 1..%d of A-Z a-z 0-9 _ -", path, i, sh.Name, shardNameBytesMax)
		}
		names[sh.Name] = true
		if sh.Prefix == "" {
			sh.Prefix = defaultPrefix
		}
		for _, f := range []*string{&sh.CA, &sh.Cert, &sh.Key, &sh.Password} {
			if *f != "" && !filepath.IsAbs(*f) {
				*f = filepath.Join(filepath.Dir(path), *f)
			}
		}
		if err := sh.check(); err != nil {
			return nil, usagef("-etcd-shards %s: shard %q: %v", path, sh.Name, err)
		}
	}
	return &m, nil
}

func validShardName(s string) bool {
	if s == "" || len(s) > shardNameBytesMax {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// check applies the -etcd-* flags' rules to one target; its message names
// the flag's counterpart in the map.
func (t *etcdTarget) check() error {
	if len(t.Endpoints) == 0 || len(t.Endpoints) > etcdEndpointsMax {
		return usagef("endpoints: needs 1..%d, host:port each", etcdEndpointsMax)
	}
	for _, ep := range t.Endpoints {
		if !validEndpoint(ep) {
			return usagef("endpoints: %q must be host:port", ep)
		}
	}
	if !strings.HasSuffix(t.Prefix, "/") {
		return usagef("prefix %q: must end in '/'", t.Prefix)
	}
	if (t.Cert == "") != (t.Key == "") {
		return usagef("cert and key: give both or neither")
	}
	if t.Cert != "" && t.CA == "" {
		return usagef("cert: a client certificate needs TLS: give ca too")
	}
	if (t.User == "") != (t.Password == "") {
		return usagef("user and password_file: give both or neither")
	}
	return nil
}

// shardMapFormat names the digest's encoding: a change of it is a change
// of every deployment's digest.
const shardMapFormat = "idem shard map v1"

// digest identifies the map's data placement: its version, K, and each
// shard's name and prefix in order — not the endpoints, TLS or auth, which
// are each node's way to a cluster and may differ between nodes. SHA-256
// over length-prefixed fields; hex of the first 16 bytes.
func (m *shardMap) digest() string {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	var n [8]byte
	field([]byte(shardMapFormat))
	binary.BigEndian.PutUint64(n[:], m.Version)
	field(n[:])
	binary.BigEndian.PutUint64(n[:], uint64(len(m.Shards)))
	field(n[:])
	for _, sh := range m.Shards {
		field([]byte(sh.Name))
		field([]byte(sh.Prefix))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
