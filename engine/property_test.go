package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal"
)

// TestProperty_StoreMatchesModelAcrossReopen runs random sequences of
// conditional batches, reads, snapshots, checkpoints, clean reopens and
// power losses against a plain map, and after every step requires the
// store to equal the map: values, versions, condition outcomes (and which
// condition failed), scan ranges and limits.
//
// Under -race (make test's go-race) it draws as -short does: the model is
// checked sequentially, so the race detector adds nothing to the extra
// draws but time (9 s of the engine's -race run), and the seed changes
// from run to run; `go test ./engine` draws them all.
func TestProperty_StoreMatchesModelAcrossReopen(t *testing.T) {
	seed := seedFor(t)
	runs, steps := 12, 600
	if testing.Short() || raceEnabled {
		runs, steps = 3, 150
	}
	for r := 0; r < runs; r++ {
		s := seed + uint64(r)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			(&propRun{t: t, rng: rand.New(rand.NewPCG(s, 0x1de4)), seed: s}).run(steps)
		})
	}
}

// Keys include a byte-order trap: "k1" < "k1\x00" < "k10" < "k\xff".
var propKeys = []string{"k0", "k1", "k1\x00", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k\xff"}

type modelItem struct {
	val []byte
	ver store.Version
}

type propRun struct {
	t     *testing.T
	rng   *rand.Rand
	seed  uint64
	disk  memDisk
	opts  Options
	db    *DB
	model map[string]modelItem
	lastV store.Version
	trace []string
	stats map[string]int
}

func (p *propRun) fail(format string, args ...any) {
	p.t.Helper()
	start := max(0, len(p.trace)-15)
	p.t.Fatalf("seed %d, step %d: %s\nlast steps:\n  %s", p.seed, len(p.trace), fmt.Sprintf(format, args...),
		strings.Join(p.trace[start:], "\n  "))
}

func (p *propRun) note(format string, args ...any) {
	p.trace = append(p.trace, fmt.Sprintf(format, args...))
}

func (p *propRun) run(steps int) {
	p.t.Helper()
	p.disk = newMemDisk()
	p.opts = quiet(Options{
		CheckpointLogBytes:  []int64{-1, 2 << 10, 0}[p.rng.IntN(3)],
		CheckpointDeltasMax: []int{-1, 1, 4, 0}[p.rng.IntN(4)],
		WAL:                 wal.Options{SegmentBytes: []int{512, 4096, 0}[p.rng.IntN(3)]},
	})
	p.model = map[string]modelItem{}
	p.stats = map[string]int{}
	p.open()
	defer func() { p.db.Close() }()
	ctx := context.Background()
	for range steps {
		switch n := p.rng.IntN(100); {
		case n < 50:
			p.apply(ctx)
		case n < 62:
			p.get(ctx)
		case n < 74:
			p.scan(ctx)
		case n < 80:
			p.snapshot(ctx)
		case n < 86:
			p.note("checkpoint")
			p.stats["checkpoint"]++
			if err := p.db.Checkpoint(); err != nil {
				p.fail("checkpoint: %v", err)
			}
		case n < 92:
			p.note("close+reopen")
			p.stats["reopen"]++
			if err := p.db.Close(); err != nil {
				p.fail("close: %v", err)
			}
			p.open()
		case n < 96:
			p.note("power loss (drop unsynced) + reopen")
			p.stats["power-loss"]++
			p.disk.Crash(p.db, memfs.DropUnsynced)
			p.open()
		default:
			p.invalid(ctx)
		}
		p.check()
	}
	p.t.Logf("%v (final %d keys, version %d)", p.stats, len(p.model), p.lastV)
}

func (p *propRun) open() {
	p.t.Helper()
	db, err := p.disk.reopen(p.opts)
	if err != nil {
		p.fail("open: %v", err)
	}
	p.db = db
}

func (p *propRun) key() string { return propKeys[p.rng.IntN(len(propKeys))] }

func (p *propRun) value() []byte {
	v := make([]byte, p.rng.IntN(48))
	for i := range v {
		v[i] = byte(p.rng.Uint32())
	}
	return v
}

// apply sends a random batch: 1-4 ops (a key may repeat: the later op
// wins), 0-3 conditions of every kind, current or stale.
func (p *propRun) apply(ctx context.Context) {
	p.t.Helper()
	b := new(store.Batch)
	for range p.rng.IntN(4) {
		k := []byte(p.key())
		cur := p.model[string(k)].ver
		switch p.rng.IntN(7) {
		case 0:
			b.Absent(k)
		case 1:
			b.Present(k)
		case 2, 3:
			b.AtVersion(k, cur)
		case 4:
			b.AtVersion(k, store.Version(p.rng.IntN(int(p.lastV)+2))) // mostly stale
		case 5:
			b.Conds = append(b.Conds, store.Condition{Key: k, Kind: store.MustBeAtVersion}) // at version 0: never holds
		default:
			b.AtVersion(k, cur+1)
		}
	}
	for range 1 + p.rng.IntN(4) {
		if p.rng.IntN(4) == 0 {
			b.Delete([]byte(p.key()))
		} else {
			b.Put([]byte(p.key()), p.value())
		}
	}

	// What the model says.
	var failed *store.Condition
	var found store.Version
	for i, c := range b.Conds {
		m, ok := p.model[string(c.Key)]
		var hold bool
		switch c.Kind {
		case store.MustBeAbsent:
			hold = !ok
		case store.MustBePresent:
			hold = ok
		case store.MustBeAtVersion:
			hold = ok && m.ver == c.Version
		}
		if !hold {
			failed, found = &b.Conds[i], m.ver
			break
		}
	}
	p.note("apply %s", describe(b))

	v, err := p.db.Apply(ctx, b)
	if failed != nil {
		var ce *store.ConditionError
		if !errors.Is(err, store.ErrConditionFailed) || !errors.As(err, &ce) {
			p.fail("Apply = %d, %v; the model says condition %s on %q fails", v, err, failed.Kind, failed.Key)
		}
		if !bytes.Equal(ce.Cond.Key, failed.Key) || ce.Cond.Kind != failed.Kind || ce.Cond.Version != failed.Version || ce.Found != found {
			p.fail("condition error %+v (found %d), want the first failing condition %+v (found %d)", ce.Cond, ce.Found, *failed, found)
		}
		if k, ok := store.FailedKey(err); !ok || !bytes.Equal(k, failed.Key) {
			p.fail("FailedKey = %q, %v", k, ok)
		}
		p.stats["rejected"]++
		return
	}
	if err != nil {
		p.fail("Apply: %v; the model says all conditions hold", err)
	}
	if v <= p.lastV {
		p.fail("version %d after version %d", v, p.lastV)
	}
	p.lastV = v
	p.stats["applied"]++
	for _, op := range b.Ops {
		if op.Delete {
			delete(p.model, string(op.Key))
		} else {
			p.model[string(op.Key)] = modelItem{val: slices.Clone(op.Value), ver: v}
		}
	}
	// Apply copied the batch: scribbling on it changes nothing.
	for _, op := range b.Ops {
		for i := range op.Value {
			op.Value[i] ^= 0xff
		}
	}
}

func (p *propRun) get(ctx context.Context) {
	p.t.Helper()
	k := p.key()
	p.note("get %q", k)
	it, err := p.db.Get(ctx, []byte(k))
	m, ok := p.model[k]
	switch {
	case !ok && !errors.Is(err, store.ErrNotFound):
		p.fail("Get(%q) = %q@%d, %v; the model has no such key", k, it.Value, it.Version, err)
	case ok && (err != nil || !bytes.Equal(it.Value, m.val) || it.Version != m.ver || string(it.Key) != k):
		p.fail("Get(%q) = %q %q@%d, %v; want %q@%d", k, it.Key, it.Value, it.Version, err, m.val, m.ver)
	}
}

// modelRange lists the model's keys in [start, end) (end nil: unbounded).
func (p *propRun) modelRange(start, end []byte) []string {
	var keys []string
	for k := range p.model {
		if bytes.Compare([]byte(k), start) >= 0 && (end == nil || bytes.Compare([]byte(k), end) < 0) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func (p *propRun) scan(ctx context.Context) {
	p.t.Helper()
	var start, end []byte
	if p.rng.IntN(4) > 0 {
		start = []byte(p.key())
	}
	if p.rng.IntN(3) > 0 {
		end = []byte(p.key())
		if p.rng.IntN(2) == 0 {
			end = store.PrefixEnd(end)
		}
	}
	limit := 1 + p.rng.IntN(len(propKeys)+2)
	p.note("scan [%q, %q) limit %d", start, end, limit)
	items, err := p.db.Scan(ctx, start, end, limit)
	if err != nil {
		p.fail("scan: %v", err)
	}
	want := p.modelRange(start, end)
	if len(want) > limit {
		want = want[:limit]
	}
	if len(items) != len(want) {
		p.fail("scan returned %d items, want %d (%q)", len(items), len(want), want)
	}
	for i, it := range items {
		m := p.model[want[i]]
		if string(it.Key) != want[i] || !bytes.Equal(it.Value, m.val) || it.Version != m.ver {
			p.fail("scan item %d = %q=%q@%d, want %q=%q@%d", i, it.Key, it.Value, it.Version, want[i], m.val, m.ver)
		}
	}
}

// snapshot checks a snapshot against the model, then that it does not move
// when the store does.
func (p *propRun) snapshot(ctx context.Context) {
	p.t.Helper()
	p.note("snapshot")
	snap := p.db.Snapshot()
	before := make(map[string]modelItem, len(p.model))
	for k, v := range p.model {
		before[k] = v
	}
	check := func(when string) {
		if snap.Len() != len(before) {
			p.fail("snapshot %s: %d keys, want %d", when, snap.Len(), len(before))
		}
		n := 0
		snap.Ascend(nil, func(it store.Item) bool {
			m, ok := before[string(it.Key)]
			if !ok || !bytes.Equal(it.Value, m.val) || it.Version != m.ver {
				p.fail("snapshot %s: %q=%q@%d, model %q@%d (%v)", when, it.Key, it.Value, it.Version, m.val, m.ver, ok)
			}
			n++
			return true
		})
		if n != len(before) {
			p.fail("snapshot %s: ascended %d keys, want %d", when, n, len(before))
		}
	}
	check("when taken")
	if snap.Version() < p.lastV {
		p.fail("snapshot version %d before the last applied batch %d", snap.Version(), p.lastV)
	}
	p.apply(ctx)
	check("after a later apply")
}

// invalid sends batches that break a limit: nothing may change.
func (p *propRun) invalid(ctx context.Context) {
	p.t.Helper()
	bad := []*store.Batch{
		nil,
		new(store.Batch),
		new(store.Batch).Put(nil, []byte("x")),
		new(store.Batch).Put(bytes.Repeat([]byte("k"), store.KeyBytesMax+1), nil),
		new(store.Batch).Absent(nil).Put([]byte("k1"), nil),
		{Conds: []store.Condition{{Key: []byte("k1"), Kind: 9}}, Ops: []store.Op{{Key: []byte("k1")}}},
	}
	b := bad[p.rng.IntN(len(bad))]
	p.note("invalid batch %d", slices.Index(bad, b))
	if _, err := p.db.Apply(ctx, b); !errors.Is(err, store.ErrInvalidBatch) {
		p.fail("invalid batch: %v, want ErrInvalidBatch", err)
	}
	if _, err := p.db.Scan(ctx, nil, nil, 0); !errors.Is(err, store.ErrInvalidScan) {
		p.fail("scan limit 0: %v, want ErrInvalidScan", err)
	}
}

// check: the whole store equals the model.
func (p *propRun) check() {
	p.t.Helper()
	items, err := p.db.Scan(context.Background(), nil, nil, store.ScanLimitMax)
	if err != nil {
		p.fail("scan: %v", err)
	}
	want := p.modelRange(nil, nil)
	if len(items) != len(want) {
		p.fail("store has %d keys, model %d", len(items), len(want))
	}
	for i, it := range items {
		m := p.model[want[i]]
		if string(it.Key) != want[i] || !bytes.Equal(it.Value, m.val) || it.Version != m.ver {
			p.fail("store %q=%q@%d, model %q=%q@%d", it.Key, it.Value, it.Version, want[i], m.val, m.ver)
		}
	}
}

func describe(b *store.Batch) string {
	var sb strings.Builder
	for _, c := range b.Conds {
		fmt.Fprintf(&sb, "if %q %s", c.Key, c.Kind)
		if c.Kind == store.MustBeAtVersion {
			fmt.Fprintf(&sb, " %d", c.Version)
		}
		sb.WriteString("; ")
	}
	for _, op := range b.Ops {
		if op.Delete {
			fmt.Fprintf(&sb, "del %q; ", op.Key)
		} else {
			fmt.Fprintf(&sb, "put %q (%d bytes); ", op.Key, len(op.Value))
		}
	}
	return sb.String()
}
