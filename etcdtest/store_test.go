package etcdtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/store"
	etcdstore "github.com/idemdb/idem/store/etcd"
	"github.com/idemdb/idem/store/storetest"
)

var ctx = context.Background()

// newStore is a store on c under prefix, on a client of its own.
func newStore(t *testing.T, c *etcdtest.Cluster, prefix string) *etcdstore.Store {
	t.Helper()
	return newStoreWith(t, c.Client(t), etcdstore.Options{Prefix: prefix})
}

func newStoreWith(t *testing.T, cli *clientv3.Client, o etcdstore.Options) *etcdstore.Store {
	t.Helper()
	s, err := etcdstore.New(cli, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance_EtcdStore holds the etcd store to the contract every
// store keeps (store/storetest), on 3 members, each subtest under a
// fresh prefix of one shared cluster, with auto-compaction running.
func TestConformance_EtcdStore(t *testing.T) {
	c := sharedCluster(t)
	cli := c.Client(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return newStoreWith(t, cli, etcdstore.Options{Prefix: etcdtest.Prefix(t)})
	})
}

// TestPrefix_DeploymentsSharingAClusterDoNotSeeEachOther: two stores under
// sibling prefixes each see only their own keys, in Get and in an
// unbounded Scan.
func TestPrefix_DeploymentsSharingAClusterDoNotSeeEachOther(t *testing.T) {
	c := sharedCluster(t)
	base := etcdtest.Prefix(t)
	a, b := newStore(t, c, base+"a/"), newStore(t, c, base+"b/")
	if _, err := a.Apply(ctx, new(store.Batch).Put([]byte("k"), []byte("of a"))); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, new(store.Batch).Absent([]byte("k")).Put([]byte("k"), []byte("of b")).Put([]byte("\xff"), nil)); err != nil {
		t.Fatalf("b's create-if-absent of a key a holds: %v", err)
	}
	for _, s := range []struct {
		store *etcdstore.Store
		want  string
		n     int
	}{{a, "of a", 1}, {b, "of b", 2}} {
		if it, err := s.store.Get(ctx, []byte("k")); err != nil || string(it.Value) != s.want {
			t.Fatalf("get: %q %v, want %q", it.Value, err, s.want)
		}
		items, err := s.store.Scan(ctx, nil, nil, 100)
		if err != nil || len(items) != s.n {
			t.Fatalf("scan: %d items %v, want %d", len(items), err, s.n)
		}
	}
}

// TestForeignValue_IsCorruptionNotAValue: a key under the prefix that Idem
// did not write reads as a typed corruption error, never as data.
func TestForeignValue_IsCorruptionNotAValue(t *testing.T) {
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	cli := c.Client(t)
	s := newStoreWith(t, cli, etcdstore.Options{Prefix: prefix})
	if _, err := cli.Put(ctx, prefix+"k", "written by someone else"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, []byte("k")); !errors.Is(err, store.ErrCorruption) {
		t.Fatalf("get: %v, want ErrCorruption", err)
	}
	if _, err := s.Scan(ctx, nil, nil, 10); !errors.Is(err, store.ErrCorruption) {
		t.Fatalf("scan: %v, want ErrCorruption", err)
	}
}

// TestConditionValue_AFailedAbsenceBringsBackTheValue: a create that
// finds its key learns what is there from the failed Txn's Else branch
// (store.ConditionError.Value), in the same round trip, at the version
// found; a failed version check carries no value, and neither does a
// foreign value (its own read reports the corruption).
func TestConditionValue_AFailedAbsenceBringsBackTheValue(t *testing.T) {
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	cli := c.Client(t)
	s := newStoreWith(t, cli, etcdstore.Options{Prefix: prefix})
	v, err := s.Apply(ctx, new(store.Batch).Put([]byte("k"), []byte("there")))
	if err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	_, err = s.Apply(ctx, new(store.Batch).Absent([]byte("other")).Absent([]byte("k")).Put([]byte("k"), []byte("mine")))
	var ce *store.ConditionError
	if !errors.As(err, &ce) || string(ce.Cond.Key) != "k" || ce.Found != v || string(ce.Value) != "there" {
		t.Fatalf("create of an existing key: %v (%+v), want its value %q at %d", err, ce, "there", v)
	}
	if st := s.Stats(); st.Txns-before.Txns != 1 || st.Ranges != before.Ranges {
		t.Fatalf("%d Txns and %d reads, want the one Txn", st.Txns-before.Txns, st.Ranges-before.Ranges)
	}
	_, err = s.Apply(ctx, new(store.Batch).AtVersion([]byte("k"), v+1000).Put([]byte("k"), nil))
	if !errors.As(err, &ce) || ce.Found != v || ce.Value != nil {
		t.Fatalf("a failed version check: %v (%+v), want no value", err, ce)
	}
	if _, err := cli.Put(ctx, prefix+"foreign", "written by someone else"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Apply(ctx, new(store.Batch).Absent([]byte("foreign")).Put([]byte("foreign"), nil))
	if !errors.As(err, &ce) || ce.Found == 0 || ce.Value != nil {
		t.Fatalf("a failed absence over a foreign value: %v (%+v), want no value", err, ce)
	}
}

// TestRejections_EtcdsOwnRefusalsWriteNothing: a store told the cluster
// takes more than it does sends what etcd refuses — too many ops, a
// request too large — and gets ErrInvalidBatch, not ErrAmbiguous, with
// nothing written. A batch beyond the request size the store knows of is
// refused before it is sent.
func TestRejections_EtcdsOwnRefusalsWriteNothing(t *testing.T) {
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	cli := c.Client(t)
	wrong := newStoreWith(t, cli, etcdstore.Options{Prefix: prefix, MaxTxnOps: 1000, MaxRequestBytes: 8 << 20})
	right := newStoreWith(t, cli, etcdstore.Options{Prefix: prefix})
	manyOps := new(store.Batch)
	for i := range 200 {
		manyOps.Put([]byte(fmt.Sprintf("ops/%03d", i)), nil)
	}
	big := new(store.Batch)
	for i := range 4 {
		big.Put([]byte(fmt.Sprintf("big/%d", i)), bytes.Repeat([]byte{'x'}, 500<<10))
	}
	for name, b := range map[string]*store.Batch{"200 ops": manyOps, "2 MB": big} {
		if _, err := wrong.Apply(ctx, b); !errors.Is(err, store.ErrInvalidBatch) || errors.Is(err, store.ErrAmbiguous) {
			t.Fatalf("%s sent to etcd: %v, want ErrInvalidBatch (etcd's refusal)", name, err)
		}
		if _, err := right.Apply(ctx, b); !errors.Is(err, store.ErrInvalidBatch) {
			t.Fatalf("%s within the right limits: %v, want ErrInvalidBatch", name, err)
		}
	}
	// Big keys: within the op and byte limits, beyond the request.
	wide := new(store.Batch)
	for i := range 128 {
		key := []byte(fmt.Sprintf("wide/%03d/%s", i, strings.Repeat("k", store.KeyBytesMax-16)))
		wide.Absent(key).Put(key, bytes.Repeat([]byte{'v'}, 1500))
	}
	if _, err := right.Apply(ctx, wide); !errors.Is(err, store.ErrInvalidBatch) {
		t.Fatalf("a %d-op batch of 4 KiB keys: %v, want ErrInvalidBatch before sending", len(wide.Ops), err)
	}
	if items, err := right.Scan(ctx, nil, nil, 10); err != nil || len(items) != 0 {
		t.Fatalf("after refusals: %d items %v, want none", len(items), err)
	}
}

// TestCompaction_ComparesHoldAfterCompactAndDefrag: a condition on a
// version compares a ModRevision, which survives compaction and
// defragmentation; only reads at a compacted revision would fail, and
// the store never reads at one.
func TestCompaction_ComparesHoldAfterCompactAndDefrag(t *testing.T) {
	c := sharedCluster(t)
	s := newStore(t, c, etcdtest.Prefix(t))
	v, err := s.Apply(ctx, new(store.Batch).Put([]byte("k"), []byte("1")))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 { // revisions to compact away
		if _, err := s.Apply(ctx, new(store.Batch).Put([]byte("other"), []byte{byte(i)})); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CompactAndDefrag(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, new(store.Batch).AtVersion([]byte("k"), v+1).Put([]byte("k"), []byte("x"))); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("a stale version after compaction: %v, want a failed condition", err)
	}
	v2, err := s.Apply(ctx, new(store.Batch).AtVersion([]byte("k"), v).Put([]byte("k"), []byte("2")))
	if err != nil {
		t.Fatalf("the live version after compaction: %v", err)
	}
	if it, err := s.Get(ctx, []byte("k")); err != nil || string(it.Value) != "2" || it.Version != v2 {
		t.Fatalf("get %+v %v", it, err)
	}
}

// TestCompaction_CASUnderCompactionAndDefragLosesNothing: writers count
// with compare-and-set while the cluster is compacted and defragmented
// over and over; the count is exactly the number of successful sets.
func TestCompaction_CASUnderCompactionAndDefragLosesNothing(t *testing.T) {
	c := sharedCluster(t)
	s := newStore(t, c, etcdtest.Prefix(t))
	const writers, setsEach = 4, 40
	if _, err := s.Apply(ctx, new(store.Batch).Put([]byte("n"), []byte("0"))); err != nil {
		t.Fatal(err)
	}
	var sets, compactions atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for sets.Load() < writers*setsEach {
				it, err := s.Get(ctx, []byte("n"))
				if err != nil {
					t.Error(err)
					return
				}
				var n int
				fmt.Sscan(string(it.Value), &n)
				_, err = s.Apply(ctx, new(store.Batch).AtVersion([]byte("n"), it.Version).Put([]byte("n"), []byte(fmt.Sprint(n+1))))
				switch {
				case err == nil:
					sets.Add(1)
				case errors.Is(err, store.ErrConditionFailed):
				default:
					t.Error(err)
					return
				}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	for loop := true; loop; {
		select {
		case <-done:
			loop = false
		default:
			if err := c.CompactAndDefrag(ctx); err != nil {
				t.Fatal(err)
			}
			compactions.Add(1)
		}
	}
	it, err := s.Get(ctx, []byte("n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sets.Load()); string(it.Value) != got {
		t.Fatalf("counter %s after %s successful sets", it.Value, got)
	}
	if compactions.Load() == 0 {
		t.Fatal("no compaction ran during the load")
	}
	t.Logf("%d sets, %d compactions+defrags", sets.Load(), compactions.Load())
}

// TestAmbiguity_LeaderHardStopUnderLoad: create-if-absent batches on
// fresh keys run while the leader is hard-stopped. Every answer is held
// to what etcd holds afterwards: nil means the key is there with that
// version and value; a refusal or a failed condition (impossible on fresh
// keys unless a resend saw its own write) means it is not; only
// ErrAmbiguous may go either way.
func TestAmbiguity_LeaderHardStopUnderLoad(t *testing.T) {
	c := startCluster(t, etcdtest.Options{})
	s := newStore(t, c, etcdtest.Prefix(t))
	const workers, perWorker = 32, 12
	type outcome struct {
		key string
		v   store.Version
		err error
	}
	results := make(chan outcome, workers*perWorker)
	stopAt := make(chan struct{})
	var started atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				if started.Add(1) == workers*perWorker/3 {
					close(stopAt)
				}
				key := fmt.Sprintf("w%02d/%02d", w, i)
				actx, cancel := context.WithTimeout(ctx, 2*time.Second)
				v, err := s.Apply(actx, new(store.Batch).Absent([]byte(key)).Put([]byte(key), []byte(key)))
				cancel()
				results <- outcome{key, v, err}
			}
		})
	}
	<-stopAt
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(leader)
	wg.Wait()
	close(results)
	c.Restart(t, leader)

	var ok, ambiguous, applied int
	for r := range results {
		it, gerr := s.Get(ctx, []byte(r.key))
		present := gerr == nil
		if gerr != nil && !errors.Is(gerr, store.ErrNotFound) {
			t.Fatalf("read back %s: %v", r.key, gerr)
		}
		switch {
		case r.err == nil:
			ok++
			if !present || it.Version != r.v || string(it.Value) != r.key {
				t.Fatalf("%s: Apply said version %d, etcd holds %+v (present %v)", r.key, r.v, it, present)
			}
		case errors.Is(r.err, store.ErrAmbiguous):
			ambiguous++
			if present {
				applied++
			}
		default:
			if present {
				t.Fatalf("%s: Apply said %v, yet etcd holds it: a false 'not applied'", r.key, r.err)
			}
		}
	}
	st := s.Stats()
	t.Logf("%d ok (%d of them settled by reading back the nonce), %d ambiguous (%d of those had committed); %d Applies rode in %d groups",
		ok, st.Resolved, ambiguous, applied, st.Grouped, st.Groups)
	if ok == 0 {
		t.Fatal("no Apply succeeded around the leader's stop")
	}
}
