package etcdstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idemdb/idem/store"
)

// Defaults are etcd's own server defaults: a cluster started with other
// --max-txn-ops or --max-request-bytes must say so in Options.
const (
	DefaultMaxTxnOps       = 128
	DefaultMaxRequestBytes = 1536 << 10
	// DefaultScanItemsMax bounds one ranged Get: a page large enough for
	// the scans above (cleanup, reconcile) to be few, small enough that a
	// page of large values stays a modest response.
	DefaultScanItemsMax = 1024
	// DefaultResolveTimeout bounds the read-back after an ambiguous Txn.
	DefaultResolveTimeout = 5 * time.Second
	// DefaultCallTimeout bounds one call to etcd, whatever the caller's
	// context allows: a node cut off from its cluster answers (unavailable,
	// or ambiguous for a write) within it instead of hanging its clients.
	DefaultCallTimeout = 5 * time.Second
)

// requestOverheadBytes is kept free of every request for what etcd adds
// to it before its --max-request-bytes check (the raft request header).
const requestOverheadBytes = 1 << 10

// Options configure a Store.
type Options struct {
	// Prefix is prepended to every key, so that deployments sharing one
	// cluster never see each other's keys. Use a trailing separator
	// ("/idem/prod/"): no prefix may be a prefix of another deployment's.
	Prefix string
	// MaxTxnOps and MaxRequestBytes must be the cluster's --max-txn-ops
	// and --max-request-bytes (0: etcd's defaults).
	MaxTxnOps       int
	MaxRequestBytes int
	// ScanItemsMax bounds the items of one Scan (0: DefaultScanItemsMax).
	ScanItemsMax int
	// ResolveTimeout bounds the read-back that settles an ambiguous Apply
	// (0: DefaultResolveTimeout).
	ResolveTimeout time.Duration
	// CallTimeout bounds each Get, Scan and Apply (0: DefaultCallTimeout).
	CallTimeout time.Duration
	// GroupInFlightMax is how many Txns the store keeps in flight before
	// it queues Applies and sends them in groups (group.go); 0 takes
	// DefaultGroupInFlightMax, a negative value never groups.
	GroupInFlightMax int
	// Space, if set, is the watcher SpaceFull reports from (space.go);
	// the caller runs it. Nil: the store never says it is full.
	Space *Space
}

// Store is an store.Store on an etcd cluster. It does not own the client:
// Close stops the store, the caller closes the client.
type Store struct {
	kv      pb.KVClient
	prefix  []byte
	end     []byte // the end of the prefix's range: every key sorts below it
	limits  store.Limits
	reqMax  int
	resolve time.Duration
	call    time.Duration
	nonce   atomic.Uint64
	closed  atomic.Bool
	stats   counters
	space   *Space // nil: never full
	// group commit (group.go): the Txns in flight and the queue; at most
	// groupMax Txns in flight (negative: no grouping), groupSubsMax
	// sub-Txns per group (--max-txn-ops: etcd bounds each level).
	group        grouper
	groupMax     int
	groupSubsMax int
}

// New returns a Store on cli's cluster.
func New(cli *clientv3.Client, o Options) (*Store, error) {
	if cli == nil {
		return nil, errors.New("etcdstore: nil client")
	}
	o = o.withDefaults()
	if o.MaxTxnOps < 1 || o.MaxRequestBytes <= requestOverheadBytes || o.ScanItemsMax < 1 || o.ResolveTimeout <= 0 || o.CallTimeout <= 0 {
		return nil, fmt.Errorf("etcdstore: invalid options %+v", o)
	}
	s := &Store{
		kv:           clientv3.RetryKVClient(cli),
		prefix:       []byte(o.Prefix),
		end:          rangeEnd([]byte(o.Prefix)),
		reqMax:       o.MaxRequestBytes - requestOverheadBytes,
		resolve:      o.ResolveTimeout,
		call:         o.CallTimeout,
		space:        o.Space,
		groupMax:     o.GroupInFlightMax,
		groupSubsMax: o.MaxTxnOps,
		limits: store.Limits{
			ApplyOpsMax: min(o.MaxTxnOps, store.BatchOpsMax),
			// The Else branch holds one read per condition: the same bound.
			ApplyCondsMax: min(o.MaxTxnOps, store.BatchOpsMax),
			// Half the request for keys and values leaves the other half to
			// the prefix, envelopes, compares and Else reads of a batch at
			// the op and condition limits with keys of typical size. A
			// batch that still does not fit is refused whole (fits).
			ApplyBytesMax: min(o.MaxRequestBytes/2, store.BatchBytesMax),
			ScanItemsMax:  min(o.ScanItemsMax, store.ScanLimitMax),
		},
	}
	// Nonces start at a random point so that two stores (two nodes, or
	// one node restarted) never number their writes alike.
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("etcdstore: nonce seed: %w", err)
	}
	s.nonce.Store(binary.BigEndian.Uint64(seed[:]))
	return s, nil
}

func (o Options) withDefaults() Options {
	if o.MaxTxnOps == 0 {
		o.MaxTxnOps = DefaultMaxTxnOps
	}
	if o.MaxRequestBytes == 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.ScanItemsMax == 0 {
		o.ScanItemsMax = DefaultScanItemsMax
	}
	if o.ResolveTimeout == 0 {
		o.ResolveTimeout = DefaultResolveTimeout
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.GroupInFlightMax == 0 {
		o.GroupInFlightMax = DefaultGroupInFlightMax
	}
	return o
}

// rangeEnd is the smallest key above every key that starts with prefix;
// for a prefix with none (empty, or all 0xff), etcd's "\x00": every key.
func rangeEnd(prefix []byte) []byte {
	if end := store.PrefixEnd(prefix); end != nil {
		return end
	}
	return []byte{0}
}

// Limits implements store.Store.
func (s *Store) Limits() store.Limits { return s.limits }

// SpaceFull reports whether the cluster's backend is above its
// high-water mark (Options.Space): the layers above then refuse new work
// and let what was started finish.
func (s *Store) SpaceFull() bool { return s.space != nil && s.space.Full() }

// Close makes every later call fail with store.ErrClosed. Calls in
// flight finish on the client, which stays the caller's to close.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return store.ErrClosed
	}
	return nil
}

// key returns the etcd key of an engine key.
func (s *Store) key(k []byte) []byte {
	out := make([]byte, 0, len(s.prefix)+len(k))
	return append(append(out, s.prefix...), k...)
}

// Get implements store.Store with one linearizable Range.
func (s *Store) Get(ctx context.Context, key []byte) (store.Item, error) {
	if s.closed.Load() {
		return store.Item{}, store.ErrClosed
	}
	s.stats.ranges.Add(1)
	cctx, cancel := context.WithTimeout(ctx, s.call)
	defer cancel()
	resp, err := s.kv.Range(cctx, &pb.RangeRequest{Key: s.key(key)})
	if err != nil {
		return store.Item{}, readError(ctx, err)
	}
	if len(resp.Kvs) == 0 {
		return store.Item{}, store.ErrNotFound
	}
	return s.item(resp.Kvs[0])
}

// Scan implements store.Store with one linearizable ranged Get: one
// revision, so one point-in-time view.
func (s *Store) Scan(ctx context.Context, start, end []byte, limit int) ([]store.Item, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if err := store.CheckScan(limit, s.limits); err != nil {
		return nil, err
	}
	req := &pb.RangeRequest{Key: s.key(start), RangeEnd: s.end, Limit: int64(limit)}
	if end != nil {
		if string(end) <= string(start) {
			return nil, nil
		}
		req.RangeEnd = s.key(end)
	}
	s.stats.ranges.Add(1)
	cctx, cancel := context.WithTimeout(ctx, s.call)
	defer cancel()
	resp, err := s.kv.Range(cctx, req)
	if err != nil {
		return nil, readError(ctx, err)
	}
	items := make([]store.Item, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		it, err := s.item(kv)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return items, nil
}

// item turns a stored key-value into the engine's view of it.
func (s *Store) item(kv *mvccpb.KeyValue) (store.Item, error) {
	value, _, err := unseal(kv.Key, kv.Value)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: kv.Key[len(s.prefix):], Value: value, Version: store.Version(kv.ModRevision)}, nil
}

// Capabilities implements store.Store: several keys in one round trip,
// and the space watcher's report.
func (s *Store) Capabilities() store.Capabilities { return store.Capabilities{MultiGet: s, Space: s} }

var _ store.Store = (*Store)(nil)

// GetMany implements store.MultiGetter with one read-only Txn of Ranges:
// one round trip, one revision, linearizable.
func (s *Store) GetMany(ctx context.Context, keys ...[]byte) ([]store.Item, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if len(keys) > store.GetManyMax {
		return nil, fmt.Errorf("etcdstore: GetMany of %d keys (at most %d)", len(keys), store.GetManyMax)
	}
	req := &pb.TxnRequest{Success: make([]*pb.RequestOp, len(keys))}
	for i, k := range keys {
		req.Success[i] = &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: s.key(k)}}}
	}
	s.stats.ranges.Add(1)
	cctx, cancel := context.WithTimeout(ctx, s.call)
	defer cancel()
	resp, err := s.kv.Txn(cctx, req)
	if err != nil {
		return nil, readError(ctx, err)
	}
	out := make([]store.Item, len(keys))
	for i, r := range resp.Responses {
		rr := r.GetResponseRange()
		if rr == nil || len(rr.Kvs) == 0 {
			out[i] = store.Item{Key: keys[i]}
			continue
		}
		it, err := s.item(rr.Kvs[0])
		if err != nil {
			return nil, err
		}
		out[i] = it
	}
	return out, nil
}

var _ store.MultiGetter = (*Store)(nil)
