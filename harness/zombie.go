package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/vfs/memfs"
)

// Zombies: a stale owner is a node that was paused past its lease while a
// successor took over, and then woke up with writes in flight. The fault
// kinds below make stale owners attempt every kind of fenced write —
// terminal, renewal, adoption, cleanup — at the moment where only the fence
// stops it (the auditor, audit.go, flags any that lands, and counts those
// the fences refused). Each is a choreography the scheduler plays exactly:
// triggers pause a node at the write it must attempt late (nodeStore.arm).

// inducedWait is how long an induced request waits for an executor slot.
const inducedWait = 5 * time.Second

// induce sends a batch with the next reserved key to node n as a client of
// its own (recorded in the history like any other), and returns the key
// and the actor.
func (sc *scenario) induce(n *node) (int, *actor) {
	k := sc.cfg.Keys + sc.induced
	sc.induced++
	sc.markSent(k)
	cl := &client{slot: -1, id: sc.rec.newClient()}
	sc.trace = append(sc.trace, fmt.Sprintf("step %d: induced batch %s via %s", sc.stepNo, keyName(k), n.id))
	a := sc.spawn("induced-"+keyName(k), func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, clientTimeout)
		defer cancel()
		sc.doBatchWait(ctx, cl, n, k, inducedWait)
	})
	return k, a
}

// terminalWriteOf matches the write that makes an existing receipt id
// terminal (the decision with the terminal receipt, or the terminal
// receipt alone): a terminal record conditioned on the receipt's version.
// (Not on the claim's: a write without its fence must match too.)
func terminalWriteOf(id string) func([]*store.Batch) bool {
	key := store.NSReceipt.Key(id)
	return func(batches []*store.Batch) bool {
		for _, b := range batches {
			cas := false
			for _, c := range b.Conds {
				cas = cas || (c.Kind == store.MustBeAtVersion && bytes.Equal(c.Key, key))
			}
			for _, op := range b.Ops {
				if cas && !op.Delete && bytes.Equal(op.Key, key) {
					if rec, err := receipt.DecodeRecord(op.Value); err == nil && rec.State == receipt.Terminal {
						return true
					}
				}
			}
		}
		return false
	}
}

// adoptionOf matches the CAS that adopts receipt id.
func adoptionOf(id string) func([]*store.Batch) bool {
	return func(batches []*store.Batch) bool {
		for _, b := range batches {
			for _, c := range b.Conds {
				if c.Kind == store.MustBeAtVersion && bytes.Equal(c.Key, lease.ClaimKey(id)) {
					for _, op := range b.Ops {
						if !op.Delete && bytes.Equal(op.Key, lease.ClaimKey(id)) {
							return true
						}
					}
				}
			}
		}
		return false
	}
}

// cleanupWrite matches a cleaner's batch: one that deletes receipts, or
// tombstones whose protection ended.
func cleanupWrite(batches []*store.Batch) bool {
	for _, b := range batches {
		for _, op := range b.Ops {
			if op.Delete && (store.NSReceipt.Has(op.Key) || store.NSTomb.Has(op.Key)) {
				return true
			}
		}
	}
	return false
}

// armAll arms a trigger of its own on every live node but skip; it returns
// them by node.
func (sc *scenario) armAll(name string, skip int, match func([]*store.Batch) bool) map[int]*trigger {
	out := map[int]*trigger{}
	for _, i := range sc.cl.live() {
		if i != skip {
			out[i] = &trigger{name: name, match: match}
			sc.cl.nodes[i].store.arm(out[i])
		}
	}
	return out
}

// firedOf is the lowest node whose trigger fired (-1: none).
func firedOf(ts map[int]*trigger) int {
	for _, i := range slices.Sorted(maps.Keys(ts)) {
		if ts[i].fired.Load() {
			return i
		}
	}
	return -1
}

func anyFired(ts map[int]*trigger) func() bool {
	return func() bool { return firedOf(ts) >= 0 }
}

// successor is the node that takes over from e's in a cluster of n ≥ 2.
func successor(e *event, n int) int { return (e.Node%n + 1 + e.Other%(n-1)) % n }

// zombie: node Z starts a new receipt R and is paused just before R's
// terminal write; its lease runs out; a successor S adopts R (its epoch
// bumped) and is paused just before its own terminal write; Z wakes, and
// its terminal write and its renewal of R must both be fenced. Then S's
// lease runs out in turn, Z (or another node) reads R as adoptable and is
// paused just before the adoption CAS; S wakes and finishes R; the late
// adoption must then fail.
func (sc *scenario) zombie(e *event) {
	n := len(sc.cl.nodes)
	z := e.Node % n
	Z := sc.cl.nodes[z]
	if !Z.up || n < 2 {
		sc.count("zombie-idle")
		return
	}
	defer sc.clearFaults()
	// Z executes R one write at a time (no chain: the terminal write is a
	// write of its own) and stops before its terminal write.
	k := sc.cfg.Keys + sc.induced
	id := txnOf(k)
	zTerm := &trigger{name: "terminal", match: terminalWriteOf(id)}
	Z.store.setFaults(storeFaults{refuseChains: true})
	Z.store.arm(zTerm)
	_, client := sc.induce(Z)
	if !sc.sim.run(func() bool { return zTerm.fired.Load() || client.done() }, stepTimeMax) {
		sc.violate(fmt.Sprintf("zombie: the request to %s did not finish within %v (liveness)", Z.id, stepTimeMax))
		return
	}
	if !zTerm.fired.Load() {
		sc.count("zombie-idle")
		return
	}
	// Z is paused: its lease runs out while the others carry on (its
	// supervisor's renewal of R queues behind the pause). Whoever adopts R
	// first stops before its terminal write; if nobody did on their own,
	// the successor's maintenance pass does.
	succ := sc.armAll("successor-terminal", z, terminalWriteOf(id))
	sc.advance(leaseTTL + 2*time.Second)
	if firedOf(succ) < 0 {
		s := successor(e, n)
		if sc.cl.nodes[s].up {
			sc.spawn("maintenance", func(ctx context.Context) { _, _ = sc.maintainOnce(ctx, s) })
		}
		sc.sim.run(anyFired(succ), actorTimeMax)
	}
	s := firedOf(succ)
	for i := range succ {
		if i != s {
			sc.cl.nodes[i].store.arm(nil)
		}
	}
	// Z wakes: its terminal write and its renewal must be fenced.
	Z.store.setFaults(storeFaults{})
	Z.store.resume()
	if !sc.sim.run(client.done, actorTimeMax) {
		sc.violate(fmt.Sprintf("zombie: %s's request did not finish after it woke (liveness)", Z.id))
		return
	}
	sc.sim.settle(actorTimeMax)
	if s < 0 {
		sc.count("zombie-unadopted")
		return
	}
	sc.lateAdoption(s, z, id)

}

// lateAdoption pauses S (node s, R's adopter) until its lease runs out:
// the next adopter stops before its CAS; S wakes and finishes R; the late
// adoption must fail. z is the zombie, whose maintenance may adopt.
func (sc *scenario) lateAdoption(s, z int, id string) {
	S, Z := sc.cl.nodes[s], sc.cl.nodes[z]
	adopters := sc.armAll("adoption", s, adoptionOf(id))
	sc.advance(leaseTTL + 2*time.Second)
	if firedOf(adopters) < 0 && Z.up {
		sc.spawn("maintenance", func(ctx context.Context) { _, _ = sc.maintainOnce(ctx, z) })
		sc.sim.run(anyFired(adopters), actorTimeMax)
	}
	S.store.resume()
	sc.sim.settle(actorTimeMax)
	if firedOf(adopters) < 0 {
		sc.count("zombie-no-late-adoption")
	}
	sc.clearFaults()
	sc.sim.settle(actorTimeMax)
}

// zombieClean: a receipt's retention ends; node Z's cleaner is paused just
// before its delete; its job lease runs out; the successor's cleaner takes
// the job and is paused before its own delete; Z wakes, and its delete must
// be fenced. Nothing the cleaners deleted may have had debt or a
// retention still running (checked from durable state, as after every
// clean).
func (sc *scenario) zombieClean(e *event) {
	n := len(sc.cl.nodes)
	z, s := e.Node%n, successor(e, n)
	Z, S := sc.cl.nodes[z], sc.cl.nodes[s]
	if !Z.up || !S.up || n < 2 {
		sc.count("zombie-clean-idle")
		return
	}
	defer sc.clearFaults()
	_, client := sc.induce(S)
	if !sc.sim.run(client.done, stepTimeMax) {
		sc.violate("zombie-clean: the request did not finish (liveness)")
		return
	}
	// Beyond the receipt's retention, and beyond any cleaner's job lease.
	sc.advance(max(sc.cfg.Retention, leaseTTL) + time.Second)
	// Debt is paid by maintenance (the owner of a receipt with visibility
	// debt holds its lease).
	for _, i := range sc.cl.live() {
		sc.perform("maintenance", func(ctx context.Context) { _, _ = sc.maintainOnce(ctx, i) })
	}
	before := sc.beforeClean()
	zDel := &trigger{name: "cleanup", match: cleanupWrite}
	Z.store.arm(zDel)
	zc := sc.spawn("cleaner", func(ctx context.Context) { _, _ = Z.svc.CleanOnce(ctx) })
	sc.sim.run(func() bool { return zDel.fired.Load() || zc.done() }, actorTimeMax)
	if !zDel.fired.Load() {
		sc.count("zombie-clean-idle")
		sc.sim.run(zc.done, actorTimeMax)
		sc.checkCleaned(before)
		return
	}
	sc.advance(leaseTTL + 2*time.Second)
	sDel := &trigger{name: "cleanup", match: cleanupWrite}
	S.store.arm(sDel)
	sCleaner := sc.spawn("cleaner", func(ctx context.Context) { _, _ = S.svc.CleanOnce(ctx) })
	sc.sim.run(func() bool { return sDel.fired.Load() || sCleaner.done() }, actorTimeMax)
	Z.store.resume()
	sc.sim.run(zc.done, actorTimeMax)
	S.store.resume()
	sc.sim.run(sCleaner.done, actorTimeMax)
	sc.sim.settle(actorTimeMax)
	sc.checkCleaned(before)
}

// debtPaidOf matches the write that clears receipt id's visibility debt
// (payDebt): one that rewrites it, terminal and debt-free, while the store
// holds it terminal with debt.
func (sc *scenario) debtPaidOf(id string) func([]*store.Batch) bool {
	key := store.NSReceipt.Key(id)
	return func(batches []*store.Batch) bool {
		it, err := sc.cl.store.Get(context.Background(), key)
		if err != nil {
			return false
		}
		if cur, err := receipt.DecodeRecord(it.Value); err != nil || cur.State != receipt.Terminal || cur.Debt == 0 {
			return false
		}
		for _, b := range batches {
			for _, op := range b.Ops {
				if !op.Delete && bytes.Equal(op.Key, key) {
					if rec, err := receipt.DecodeRecord(op.Value); err == nil && rec.Debt == 0 {
						return true
					}
				}
			}
		}
		return false
	}
}

// debtClean: a new receipt R's intents stay unresolved (deferred
// resolution: R is terminal with visibility debt); maintenance resolves them
// but fails to publish that the debt is paid — R still carries it, and no
// coordinator record remains to stop a delete — and R's retention ends. The
// cleaner must leave R alone: only paying the debt makes it cleanable.
func (sc *scenario) debtClean(e *event) {
	A := sc.node(e)
	if !A.up {
		sc.count("debt-clean-idle")
		return
	}
	defer sc.clearFaults()
	// Resolve what earlier batches left, so that the new one does not meet
	// their intents (a conflict would abort it: no debt).
	for _, i := range sc.cl.live() {
		sc.perform("maintenance", func(ctx context.Context) { _, _ = sc.maintainOnce(ctx, i) })
	}
	id := txnOf(sc.cfg.Keys + sc.induced)
	pay := sc.armAll("debt-paid", -1, sc.debtPaidOf(id))
	for _, t := range pay {
		t.fail = true
	}
	_, client := sc.induce(A)
	if !sc.sim.run(client.done, stepTimeMax) {
		sc.violate("debt-clean: the request did not finish (liveness)")
		return
	}
	sc.advance(max(sc.cfg.Retention, leaseTTL) + time.Second)
	if firedOf(pay) < 0 {
		m := sc.spawn("maintenance", func(ctx context.Context) { _, _ = sc.maintainOnce(ctx, e.Node%len(sc.cl.nodes)) })
		sc.sim.run(func() bool { return firedOf(pay) >= 0 || m.done() }, actorTimeMax)
		sc.sim.run(m.done, actorTimeMax)
	}
	before := sc.beforeClean()
	if r := before.recs[id]; firedOf(pay) < 0 || r == nil || r.Debt == 0 {
		sc.count("debt-clean-idle")
		return
	}
	live := sc.cl.live()
	cleaner := sc.cl.nodes[live[e.Other%len(live)]]
	sc.perform("cleaner", func(ctx context.Context) { _, _ = cleaner.svc.CleanOnce(ctx) })
	sc.checkCleaned(before)
}

// checkCleaned checks, from durable state, that no receipt present in
// before (a read of every receipt and tombstone before a cleaner ran, with
// the audit's rewrite counts then) and gone now had debt or a retention
// still running, or left no tombstone while its protection runs — unless
// its record was rewritten meanwhile (its debt paid while the cleaner ran:
// then the auditor judged the delete on what it deleted) — and that no
// tombstone gone now was still protecting its key; then starts the new
// generations of the keys whose receipts or tombstones are gone.
func (sc *scenario) checkCleaned(before cleanView) {
	if sc.cl.health() != nil || sc.cl.opens != before.opens {
		// The store fail-stopped or reopened meanwhile: until it restarts,
		// reads do not show what is durable, and what was is not known.
		sc.newGenerations()
		return
	}
	after, tombs := sc.receipts(), sc.tombstones()
	rewrites := sc.cl.audit.rewritten()
	now := time.Now().UnixMilli()
	for _, id := range slices.Sorted(maps.Keys(before.recs)) {
		rec := before.recs[id]
		if _, ok := after[id]; ok {
			continue
		}
		_, tomb := tombs[id]
		switch {
		case rewrites[id] != before.rewrites[id]:
		case rec.State != receipt.Terminal || rec.Debt != 0:
			sc.violate(fmt.Sprintf("the cleaner deleted receipt %s with debt (state %s, debt %d)", id, rec.State, rec.Debt))
		case rec.RetainUntil > now:
			sc.violate(fmt.Sprintf("the cleaner deleted receipt %s %v before its retention ended", id, time.Duration(rec.RetainUntil-now)*time.Millisecond))
		case rec.ProtectUntil > now && !tomb:
			sc.violate(fmt.Sprintf("the cleaner deleted receipt %s, protected %v longer, and left no tombstone", id, time.Duration(rec.ProtectUntil-now)*time.Millisecond))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(before.tombs)) {
		if t := before.tombs[id]; t.protectUntil > now {
			if _, ok := tombs[id]; !ok {
				sc.violate(fmt.Sprintf("the cleaner deleted the tombstone of %s %v before its protection ended", id, time.Duration(t.protectUntil-now)*time.Millisecond))
			}
		}
	}
	sc.newGenerations()
}

// cleanView is what checkCleaned compares with.
type cleanView struct {
	recs     map[string]*receipt.Record
	tombs    map[string]tombVal
	rewrites map[string]int
	opens    int
}

// beforeClean also observes the store (observe, observeSessions) while
// nothing can delete a receipt yet: a receipt that settled since the last
// step — while a choreography let time pass, say — would otherwise be gone
// before the harness saw it terminal, and its effect stay unbounded.
func (sc *scenario) beforeClean() cleanView {
	if sc.cl.health() == nil {
		sc.observe()
		sc.observeSessions()
	}
	return cleanView{recs: sc.receipts(), tombs: sc.tombstones(), rewrites: sc.cl.audit.rewritten(), opens: sc.cl.opens}
}

// damageCheckpoint: with nothing in flight, a fresh checkpoint, then a
// power loss that also flips one value byte in the newest checkpoint (a
// marker document's generation digit: still valid JSON, so only the
// checksum tells). The engine must notice, fall back to the previous
// checkpoint and the log, and reopen exactly the state it had.
func (sc *scenario) damageCheckpoint(e *event) {
	if err := sc.cl.db.Checkpoint(); err != nil {
		sc.count("ckpt-damage-idle")
		return
	}
	want, err := sc.everything()
	if err != nil {
		sc.violate("before the checkpoint damage: " + err.Error())
		return
	}
	var damaged string
	err = sc.cl.crashStore(memfs.DropUnsynced, func(fs *memfs.FS) { damaged = damageNewestCheckpoint(fs) })
	if err != nil {
		sc.violate(fmt.Sprintf("reopen after damage to checkpoint %s: %v", damaged, err))
		return
	}
	if damaged == "" {
		sc.count("ckpt-damage-idle")
	} else {
		got, err := sc.everything()
		if err != nil {
			sc.violate("after the checkpoint damage: " + err.Error())
		} else if diff := diffItems(want, got); diff != "" {
			sc.violate(fmt.Sprintf("after a power loss with checkpoint %s damaged, the store reopened different: %s", damaged, diff))
		}
	}
	sc.restart()
}

// damageNewestCheckpoint flips a marker document's generation digit in a
// file of the newest checkpoint link — a base's part or a delta — that
// holds one; it returns the file ("" if none). Only the newest link may be
// lost without loss: a delta needs every link before it.
func damageNewestCheckpoint(fs vfs.FS) string {
	entries, err := fs.ReadDir(dataDir)
	if err != nil {
		return ""
	}
	var names []string
	for _, de := range entries {
		if n := de.Name(); strings.HasPrefix(n, "ckpt-") && (strings.HasSuffix(n, ".ckpt") || strings.HasSuffix(n, ".delta")) {
			names = append(names, n)
		}
	}
	slices.Sort(names) // zero-padded indexes: the newest link sorts last
	if len(names) == 0 {
		return ""
	}
	link := func(name string) string { return name[:min(len(name), len("ckpt-")+20)] }
	newest := link(names[len(names)-1])
	pattern := []byte(`"gen":`)
	for i := len(names) - 1; i >= 0 && link(names[i]) == newest; i-- {
		path := filepath.Join(dataDir, names[i])
		data, err := vfs.ReadFile(fs, path)
		if err != nil {
			continue
		}
		at := bytes.Index(data, pattern)
		if at < 0 || at+len(pattern) >= len(data) {
			continue
		}
		at += len(pattern)
		d := data[at]
		if d < '0' || d > '9' {
			continue
		}
		f, err := fs.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if _, err := f.Seek(int64(at), io.SeekStart); err == nil {
			_, err = f.Write([]byte{'0' + (d-'0'+1)%10})
			if err == nil {
				err = f.Sync()
			}
		}
		f.Close()
		if err == nil {
			return names[i]
		}
	}
	return ""
}

// everything reads the whole store.
func (sc *scenario) everything() ([]store.Item, error) {
	return sc.scanRange([]byte{}, []byte{0xff}, nil)
}

// diffItems describes the first differences between two reads of the
// whole store ("" if none).
func diffItems(want, got []store.Item) string {
	var diffs []string
	w := map[string]store.Item{}
	for _, it := range want {
		w[string(it.Key)] = it
	}
	seen := map[string]bool{}
	for _, it := range got {
		seen[string(it.Key)] = true
		x, ok := w[string(it.Key)]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%q appeared", it.Key))
		case !bytes.Equal(x.Value, it.Value) || x.Version != it.Version:
			diffs = append(diffs, fmt.Sprintf("%q is %q@%d, was %q@%d", it.Key, it.Value, it.Version, x.Value, x.Version))
		}
	}
	for _, it := range want {
		if !seen[string(it.Key)] {
			diffs = append(diffs, fmt.Sprintf("%q vanished", it.Key))
		}
	}
	if len(diffs) > 4 {
		diffs = append(diffs[:4], fmt.Sprintf("and %d more", len(diffs)-4))
	}
	return strings.Join(diffs, "; ")
}
