package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs/memfs"
)

// A history records a concurrent workload of conditional multi-key batches
// and every Apply outcome, and checks that a recovered store is explained by
// it (verifyRecovered). Every put of batch N carries the value "B<N>.<pad>",
// so each key names the batch that last wrote it and a partly applied batch
// is detectable.

type outcome int

const (
	outUnknown    outcome = iota // attempted, no answer seen (the process died)
	outAcked                     // Apply returned nil
	outRejected                  // ErrConditionFailed: nothing written
	outAmbiguous                 // ErrAmbiguous: all or nothing, unknown which
	outNotWritten                // ErrFailStopped or ErrClosed: nothing written
)

func (o outcome) String() string {
	return [...]string{"unknown", "acknowledged", "rejected", "ambiguous", "not-written"}[o]
}

// classify maps an Apply error to its outcome; ok is false for an error the
// contract does not allow.
func classify(err error) (outcome, bool) {
	switch {
	case err == nil:
		return outAcked, true
	case errors.Is(err, store.ErrConditionFailed):
		return outRejected, true
	case errors.Is(err, store.ErrAmbiguous):
		return outAmbiguous, true
	case errors.Is(err, store.ErrFailStopped), errors.Is(err, store.ErrClosed):
		return outNotWritten, true
	}
	return outUnknown, false
}

type hop struct {
	key, val string
	del      bool
}

type hbatch struct {
	id      int
	ops     []hop // distinct keys
	out     outcome
	version store.Version
}

func (b *hbatch) op(key string) (hop, bool) {
	for _, op := range b.ops {
		if op.key == key {
			return op, true
		}
	}
	return hop{}, false
}

type history struct {
	mu      sync.Mutex
	batches map[int]*hbatch
	acked   atomic.Int64
	nextID  atomic.Int64
	report  io.Writer // if set, TRY/RES lines go here (child processes)
}

func newHistory() *history { return &history{batches: map[int]*hbatch{}} }

func (h *history) add(b *hbatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.batches[b.id] = b
	if h.report != nil {
		var sb strings.Builder
		fmt.Fprintf(&sb, "TRY %d ", b.id)
		for i, op := range b.ops {
			if i > 0 {
				sb.WriteByte(',')
			}
			if op.del {
				fmt.Fprintf(&sb, "D:%s", op.key)
			} else {
				fmt.Fprintf(&sb, "P:%s:%s", op.key, op.val)
			}
		}
		sb.WriteByte('\n')
		io.WriteString(h.report, sb.String()) // one write: a line survives a crash whole or not at all
	}
}

func (h *history) settle(b *hbatch, out outcome, v store.Version) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b.out, b.version = out, v
	if out == outAcked {
		h.acked.Add(1)
	}
	if h.report != nil {
		io.WriteString(h.report, fmt.Sprintf("RES %d %d %d\n", b.id, out, v))
	}
}

func (h *history) counts() map[outcome]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := map[outcome]int{}
	for _, b := range h.batches {
		m[b.out]++
	}
	return m
}

// parseHistory reads the TRY/RES lines a child process wrote.
func parseHistory(r io.Reader) (*history, error) {
	h := newHistory()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "TRY":
			id, err := strconv.Atoi(f[1])
			if err != nil {
				return nil, fmt.Errorf("line %q: %v", sc.Text(), err)
			}
			b := &hbatch{id: id}
			for _, o := range strings.Split(f[2], ",") {
				p := strings.SplitN(o, ":", 3)
				switch {
				case len(p) == 2 && p[0] == "D":
					b.ops = append(b.ops, hop{key: p[1], del: true})
				case len(p) == 3 && p[0] == "P":
					b.ops = append(b.ops, hop{key: p[1], val: p[2]})
				default:
					return nil, fmt.Errorf("line %q: bad op %q", sc.Text(), o)
				}
			}
			h.batches[id] = b
		case len(f) == 4 && f[0] == "RES":
			id, err1 := strconv.Atoi(f[1])
			out, err2 := strconv.Atoi(f[2])
			v, err3 := strconv.ParseUint(f[3], 10, 64)
			b := h.batches[id]
			if err := errors.Join(err1, err2, err3); err != nil || b == nil {
				return nil, fmt.Errorf("line %q: %v (batch known: %v)", sc.Text(), err, b != nil)
			}
			b.out, b.version = outcome(out), store.Version(v)
			if b.out == outAcked {
				h.acked.Add(1)
			}
		}
	}
	return h, sc.Err()
}

func batchID(val []byte) (int, bool) {
	s := string(val)
	if !strings.HasPrefix(s, "B") {
		return 0, false
	}
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		return 0, false
	}
	id, err := strconv.Atoi(s[1:dot])
	return id, err == nil
}

// workload drives concurrent conditional batches on a small key space.
type workload struct {
	db        *DB
	h         *history
	keys      int // key space k00..k<keys-1>
	workers   int
	ckptEvery int // each worker calls Checkpoint after this many of its ops (0: never)
	maxOps    int // per worker
}

func wkey(i int) string { return fmt.Sprintf("k%02d", i) }

// genBatch builds one batch: 1-4 distinct keys (puts, some deletes), with
// 0-2 conditions read from the store just before (so they pass or fail
// depending on what races in), some deliberately stale.
func (w *workload) genBatch(ctx context.Context, rng *rand.Rand) (*store.Batch, *hbatch) {
	hb := &hbatch{id: int(w.h.nextID.Add(1))}
	b := new(store.Batch)
	for _, ki := range rng.Perm(w.keys)[:1+rng.IntN(4)] {
		k := wkey(ki)
		if rng.IntN(8) == 0 {
			hb.ops = append(hb.ops, hop{key: k, del: true})
			b.Delete([]byte(k))
			continue
		}
		pad := make([]byte, rng.IntN(96))
		for i := range pad {
			pad[i] = 'a' + byte(rng.IntN(26))
		}
		v := fmt.Sprintf("B%d.%s", hb.id, pad)
		hb.ops = append(hb.ops, hop{key: k, val: v})
		b.Put([]byte(k), []byte(v))
	}
	for range rng.IntN(3) {
		k := []byte(hb.ops[rng.IntN(len(hb.ops))].key)
		if rng.IntN(4) == 0 {
			k = []byte(wkey(rng.IntN(w.keys)))
		}
		var cur store.Version
		if it, err := w.db.Get(ctx, k); err == nil {
			cur = it.Version
		}
		switch rng.IntN(10) {
		case 0:
			b.Present(k)
		case 1:
			b.AtVersion(k, cur+1) // stale or from the future: fails
		default:
			b.AtVersion(k, cur) // absent if cur == 0
		}
	}
	return b, hb
}

// run starts the workers and waits for them. Each stops after maxOps, when
// stop() reports true (checked after every op), or when the store refuses
// writes for good.
func (w *workload) run(t *testing.T, seed uint64, stop func() bool) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := 0; g < w.workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for n := 1; n <= w.maxOps; n++ {
				var err error
				if rng.IntN(4) == 0 {
					err = w.applyChain(ctx, t, rng)
				} else {
					b, hb := w.genBatch(ctx, rng)
					w.h.add(hb)
					var v store.Version
					v, err = w.db.Apply(ctx, b)
					out, ok := classify(err)
					if !ok {
						t.Errorf("batch %d: Apply returned %v, which the contract does not allow", hb.id, err)
						return
					}
					if out == outAcked && v == 0 {
						t.Errorf("batch %d acknowledged at version 0", hb.id)
					}
					w.h.settle(hb, out, v)
				}
				if w.ckptEvery > 0 && n%w.ckptEvery == 0 {
					if err := w.db.Checkpoint(); err != nil && !errors.Is(err, fault.ErrInjected) && !errors.Is(err, store.ErrClosed) &&
						!errors.Is(err, memfs.ErrCrashed) {
						t.Errorf("checkpoint: %v", err)
					}
				}
				if (stop != nil && stop()) || errors.Is(err, store.ErrClosed) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// applyChain applies 2-3 generated batches as one ApplyChain and settles
// each link with the chain's outcome. A later link sometimes requires a key
// an earlier link wrote (present: holds through the chain's overlay) or
// deleted (present: fails, so the whole chain is rejected).
func (w *workload) applyChain(ctx context.Context, t *testing.T, rng *rand.Rand) error {
	n := 2 + rng.IntN(2)
	bs := make([]*store.Batch, n)
	hbs := make([]*hbatch, n)
	for i := range bs {
		bs[i], hbs[i] = w.genBatch(ctx, rng)
		if i > 0 && rng.IntN(2) == 0 {
			prev := hbs[i-1].ops[rng.IntN(len(hbs[i-1].ops))]
			bs[i].Present([]byte(prev.key))
		}
		w.h.add(hbs[i])
	}
	vs, err := w.db.ApplyChain(ctx, bs...)
	out, ok := classify(err)
	if !ok {
		t.Errorf("chain %d..%d: ApplyChain returned %v, which the contract does not allow", hbs[0].id, hbs[n-1].id, err)
		return err
	}
	for i, hb := range hbs {
		var v store.Version
		if out == outAcked {
			if len(vs) != n || (i > 0 && vs[i] != vs[i-1]+1) || vs[i] == 0 {
				t.Errorf("chain %d..%d acknowledged at versions %v", hbs[0].id, hbs[n-1].id, vs)
			} else {
				v = vs[i]
			}
		}
		w.h.settle(hb, out, v)
	}
	return err
}

type recBatch struct {
	b *hbatch
	v store.Version
}

// verifyRecovered checks a recovered store against a history:
//
//   - every value was written by a batch that was attempted and not
//     rejected or refused (ErrConditionFailed, ErrFailStopped, ErrClosed
//     mean nothing was written);
//   - a batch visible on several keys is visible at one version, its
//     acknowledged one if it was acknowledged;
//   - replaying the present batches (acknowledged ones and visible
//     ambiguous ones) in version order gives exactly the store, except that
//     a key may be missing where an invisible ambiguous batch deleted it:
//     so no acknowledged write is lost and no batch is partly applied.
//
// With ordered set, every visible ambiguous batch must follow every
// acknowledged one in the log (true in-process: only the failing group's
// batches are ambiguous). It returns the store's contents.
func verifyRecovered(t *testing.T, db *DB, h *history, ordered bool) map[string]store.Item {
	t.Helper()
	got := scanAll(t, db)
	h.mu.Lock()
	defer h.mu.Unlock()

	visible := map[int]store.Version{}
	for k, it := range got {
		id, ok := batchID(it.Value)
		b := h.batches[id]
		if !ok || b == nil {
			t.Errorf("key %s = %q@%d was written by no attempted batch", k, it.Value, it.Version)
			continue
		}
		if b.out == outRejected || b.out == outNotWritten {
			t.Errorf("key %s shows batch %d, whose Apply said %s (nothing may be written)", k, id, b.out)
		}
		if op, ok := b.op(k); !ok || op.del || op.val != string(it.Value) {
			t.Errorf("key %s = %q, which batch %d did not write (ops %v)", k, it.Value, id, b.ops)
		}
		if v, seen := visible[id]; seen && v != it.Version {
			t.Errorf("batch %d visible at versions %d and %d", id, v, it.Version)
		}
		visible[id] = it.Version
		if b.out == outAcked && b.version != it.Version {
			t.Errorf("key %s shows batch %d at version %d, acknowledged at %d", k, id, it.Version, b.version)
		}
	}

	var present []recBatch
	maybeDeleted := map[string][]int{} // key -> invisible ambiguous batches deleting it
	var maxAcked store.Version
	minAmbiguous := ^store.Version(0)
	for _, b := range h.batches {
		v, vis := visible[b.id]
		switch {
		case b.out == outAcked:
			present = append(present, recBatch{b, b.version})
			maxAcked = max(maxAcked, b.version)
		case (b.out == outAmbiguous || b.out == outUnknown) && vis:
			present = append(present, recBatch{b, v})
			minAmbiguous = min(minAmbiguous, v)
		case b.out == outAmbiguous || b.out == outUnknown:
			for _, op := range b.ops {
				if op.del {
					maybeDeleted[op.key] = append(maybeDeleted[op.key], b.id)
				}
			}
		}
	}
	if ordered && minAmbiguous <= maxAcked {
		t.Errorf("an ambiguous batch is visible at version %d, before the last acknowledged one (%d)", minAmbiguous, maxAcked)
	}
	sort.Slice(present, func(i, j int) bool { return present[i].v < present[j].v })
	type want struct {
		val string
		v   store.Version
		id  int
	}
	expect := map[string]want{}
	for i, p := range present {
		if i > 0 && present[i-1].v == p.v {
			t.Errorf("batches %d and %d both at version %d", present[i-1].b.id, p.b.id, p.v)
		}
		for _, op := range p.b.ops {
			if op.del {
				delete(expect, op.key)
			} else {
				expect[op.key] = want{op.val, p.v, p.b.id}
			}
		}
	}
	for k, e := range expect {
		it, ok := got[k]
		switch {
		case ok && (string(it.Value) != e.val || it.Version != e.v):
			t.Errorf("key %s = %.12q@%d, but the present batches leave batch %d@%d there (lost or partial write)", k, it.Value, it.Version, e.id, e.v)
		case !ok && len(maybeDeleted[k]) == 0:
			t.Errorf("key %s is missing: batch %d (%s) wrote it at version %d and no batch that may be present deletes it",
				k, e.id, h.batches[e.id].out, e.v)
		}
	}
	for k, it := range got {
		if _, ok := expect[k]; !ok {
			t.Errorf("key %s = %.12q@%d, but a later present batch deleted it", k, it.Value, it.Version)
		}
	}
	return got
}

// afterRecovery proves a recovered store is usable and its recovery
// repeatable: a new batch applies, a checkpoint succeeds, and a clean
// reopen shows the same state plus that batch.
func afterRecovery(t *testing.T, dir string, opts Options, db *DB, state map[string]store.Item) {
	t.Helper()
	ctx := context.Background()
	v, err := db.Apply(ctx, new(store.Batch).Put([]byte("after"), []byte("recovery")))
	if err != nil {
		t.Fatalf("apply after recovery: %v", err)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatalf("checkpoint after recovery: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("close after recovery: %v", err)
	}
	want := make(map[string]store.Item, len(state)+1)
	for k, it := range state {
		want[k] = it
	}
	want["after"] = store.Item{Key: []byte("after"), Value: []byte("recovery"), Version: v}
	db2, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("second reopen: %v", err)
	}
	defer db2.Close()
	sameState(t, "second reopen", scanAll(t, db2), want)
}
