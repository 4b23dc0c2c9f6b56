package etcdtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	etcdstore "github.com/idemdb/idem/store/etcd"
	"github.com/idemdb/idem/table"
)

// The fault harness's etcd variant: Idem nodes in this process on a real
// 3-member cluster, each talking to etcd only through its own member's
// Link, while a seeded schedule stops and restarts members (the leader
// among them), cuts, delays and blackholes links, and crashes nodes, whose
// receipts the others adopt once their leases expire. Clients send keyed
// batches (each key over and over) and read counters. Then everything
// heals, every key is asked once more, and porcupine checks the history:
// every batch applied at most once, a committed answer means it did, a
// not-applied one that it never did, every read saw exactly what was
// linearized before it — and every retry of a key got the first terminal
// answer. An outcome porcupine cannot decide counts as a failure.
var (
	chaosSeeds    = flag.Int("chaos.seeds", 2, "seeds of TestChaos_EtcdCluster (make fault raises it)")
	chaosDuration = flag.Duration("chaos.duration", 4*time.Second, "fault schedule per seed")
)

const (
	chaosNodes = 3
	// Keyed batches: key k increments counter k % chaosDocs. Clients pick
	// from a window of chaosWindow keys that the schedule moves on at each
	// step, so fresh keys keep executing (and crashes catch them in
	// flight) while recent ones are retried. 64 keys per counter: one bit
	// each in the model's state.
	chaosKeys   = 256
	chaosDocs   = 4
	chaosWindow = 8
	// The keys of crashMidRequest, apart from the clients' window.
	chaosDrillFirst = 200
	chaosDrillKeys  = chaosKeys - chaosDrillFirst
	// chaosDrillDelay slows the dying node's link: its write lands, the
	// answer takes this long to come back, and the node dies meanwhile.
	chaosDrillDelay = 200 * time.Millisecond
	chaosClients    = 6
	chaosTTL        = time.Second // short leases, so adoption happens within a seed
	// chaosFaultEvery paces the schedule: one fault or heal per step.
	chaosFaultEvery = 150 * time.Millisecond
	// chaosSettle bounds how long the healed system may take to make every
	// receipt terminal.
	chaosSettle = 30 * time.Second
	// chaosCheckTimeout bounds porcupine on one seed. The search is CPU
	// work in the test binary (under -race too): 20 s left a 601-operation
	// history undecided once at load average 12–15, so the bound is for a
	// busy machine, not a quiet one (a decided history takes ~1 s there).
	chaosCheckTimeout = 90 * time.Second
)

func TestChaos_EtcdCluster(t *testing.T) {
	// On a cluster of its own, paced by a schedule in real time: it
	// waits beside others.
	t.Parallel()
	for seed := range uint64(*chaosSeeds) {
		t.Run(fmt.Sprintf("seed=%d", seed+1), func(t *testing.T) { runChaos(t, seed+1) })
	}
}

// chaosOp is one client operation: a keyed batch, or a counter read.
type chaosIn struct {
	read bool
	key  int // batch
	doc  int // the counter the batch increments, or the one read
}

type chaosOut struct {
	class outcomeClass
	env   string // terminal envelope, rendered
	value int    // read
}

type outcomeClass uint8

const (
	unknown outcomeClass = iota
	committed
	notApplied
)

type chaosNode struct {
	mu    sync.Mutex
	svc   *receipt.Service
	store *etcdstore.Store
	up    bool
}

type chaos struct {
	t        *testing.T
	c        *etcdtest.Cluster
	prefix   string
	rng      *rand.Rand
	nodes    [chaosNodes]*chaosNode
	tick     atomic.Int64
	mu       sync.Mutex
	history  []porcupine.Operation
	restarts int
	adopted  atomic.Int64 // receipts adopted, by nodes since crashed
	window   atomic.Int64 // the first key clients pick from
	probe    *etcdstore.Store
	drills   atomic.Int64
	// twoWrites runs the nodes on the two-write path (SeparateDecide), on
	// every other seed: a request that commits directly is otherwise one
	// write, which leaves no undecided receipt for a crash to strand.
	twoWrites bool
	// midRequest counts the crashes that left a created, undecided
	// receipt behind (crashMidRequest saw it before the crash).
	midRequest int
	// sessions holds each session key's one session (chaos_sessions_test.go).
	sessMu                             sync.Mutex
	sessions                           map[int]*keySession
	sessionsCommitted, sessionsAborted atomic.Int64
}

func runChaos(t *testing.T, seed uint64) {
	ch := &chaos{t: t, c: startCluster(t, etcdtest.Options{Proxied: true, AutoCompactionMode: "periodic", AutoCompactionRetention: "1s"}),
		prefix: etcdtest.Prefix(t), rng: rand.New(rand.NewPCG(seed, 0xe7cd)), twoWrites: seed%2 == 0}
	var err error
	if ch.probe, err = etcdstore.New(ch.c.Client(t), etcdstore.Options{Prefix: ch.prefix}); err != nil {
		t.Fatal(err)
	}
	for i := range ch.nodes {
		ch.nodes[i] = &chaosNode{}
		ch.start(i)
	}
	if _, _, err := ch.nodes[0].svc.Tables().Create(ctx, "alice", "t", 0); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var clients sync.WaitGroup
	for cl := range chaosClients {
		rng := rand.New(rand.NewPCG(seed, uint64(cl)))
		clients.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ch.clientStep(cl, rng)
			}
		})
	}
	faults := ch.schedule(*chaosDuration)
	close(stop)
	clients.Wait()

	ch.healAll()
	ch.settle()
	// Every key used once more, and every counter: terminal answers now.
	used := make([]int, 0, chaosKeys)
	for k := range int(ch.window.Load()) + chaosWindow {
		used = append(used, k)
	}
	for d := range min(int(ch.drills.Load()), chaosDrillKeys) {
		used = append(used, chaosDrillFirst+d)
	}
	for _, k := range used {
		ch.terminalAfterHealing(k)
	}
	for d := range chaosDocs {
		ch.read(chaosClients, d, 0)
	}
	classes := map[outcomeClass]int{}
	for _, op := range ch.history {
		if in := op.Input.(chaosIn); !in.read {
			classes[op.Output.(chaosOut).class]++
		}
	}
	adopted := ch.adopted.Load()
	for _, n := range ch.nodes {
		adopted += int64(n.svc.Stats().Adopted)
	}
	t.Logf("seed %d: %d operations (batches: %d committed, %d not applied, %d unknown; of them session commits: %d committed, %d not applied), faults %v, node restarts %d, owners killed mid-request %d, receipts adopted %d",
		seed, len(ch.history), classes[committed], classes[notApplied], classes[unknown], ch.sessionsCommitted.Load(), ch.sessionsAborted.Load(),
		faults, ch.restarts, ch.midRequest, adopted)
	if ch.sessionsCommitted.Load() == 0 {
		t.Fatal("no session committed: the schedule left sessions unchecked")
	}
	if ch.midRequest > 0 && adopted == 0 {
		t.Fatalf("%d owners died holding an undecided receipt, yet no node adopted one", ch.midRequest)
	}
	if classes[committed] == 0 {
		t.Fatal("no batch committed: the schedule left nothing to check")
	}
	ch.check()
}

// start opens node i: a fresh store on a client of its own member only,
// so that member i's Link is node i's path to etcd.
func (ch *chaos) start(i int) {
	n := ch.nodes[i]
	cli := ch.c.Client(ch.t, i)
	st, err := etcdstore.New(cli, etcdstore.Options{Prefix: ch.prefix, ResolveTimeout: time.Second})
	if err != nil {
		ch.t.Fatal(err)
	}
	open := func() (*receipt.Service, error) {
		octx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return receipt.Open(octx, st, receipt.WithTestKnobs(receipt.Options{Node: fmt.Sprintf("node-%d", i), Clock: lease.Real{}, Logger: quiet,
			LeaseTTL: chaosTTL, FirstPassMax: 100 * time.Millisecond}, testknobs.Receipt{SeparateDecide: ch.twoWrites}))
	}
	svc, err := open()
	for attempt := 0; err != nil && attempt < 20; attempt++ {
		// Open writes the node's incarnation: it fails while its member
		// is down or electing (the link is healed before a restart).
		waitAWhile(50 * time.Millisecond)
		svc, err = open()
	}
	if err != nil {
		ch.t.Fatalf("open node %d: %v", i, err)
	}
	n.mu.Lock()
	n.svc, n.store, n.up = svc, st, true
	n.mu.Unlock()
}

// crash stops node i as a process dies: its store refuses every call at
// once, then its loops stop. Nothing is handed over; its leases expire.
func (ch *chaos) crash(i int) {
	n := ch.nodes[i]
	n.mu.Lock()
	svc, st := n.svc, n.store
	n.up = false
	n.mu.Unlock()
	st.Close()
	svc.Close()
	ch.adopted.Add(int64(svc.Stats().Adopted))
}

// crashMidRequest kills node i while it owns a receipt it has created
// but not decided: its link is slowed, it starts a request for a fresh
// key, and it dies as soon as another node can see the receipt — before
// the answer to that write is back, so its next write is never sent.
// Another node (or its own next incarnation) must adopt and finish it.
// On the one-write path the receipt is terminal once seen: the crash is
// then one in the write's round trip, and leaves nothing to adopt.
func (ch *chaos) crashMidRequest(i int) {
	key := chaosDrillFirst + int(ch.drills.Add(1)-1)%chaosDrillKeys
	ch.c.Link(i).Delay(chaosDrillDelay)
	n := ch.nodes[i]
	n.mu.Lock()
	svc := n.svc
	n.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ch.batchOn(svc, chaosClients+1, key)
	}()
	rkey := store.NSReceipt.Key(receipt.Bind("alice", "t", fmt.Sprint(key)))
	var it store.Item
	seen := testsupport.Eventually(3*time.Second, func() bool {
		var err error
		it, err = ch.probe.Get(ctx, rkey)
		return err == nil
	})
	ch.crash(i)
	<-done
	if seen {
		if rec, err := receipt.DecodeRecord(it.Value); err != nil || rec.State != receipt.Terminal {
			ch.midRequest++
		}
	}
}

// waitAWhile is the schedule's pacing: real time passing is what the
// faults act on (leases, elections, deadlines), not a wait for a result.
func waitAWhile(d time.Duration) { <-time.After(d) }

func (ch *chaos) now() int64 { return ch.tick.Add(1) }

func (ch *chaos) record(client int, in chaosIn, call int64, out chaosOut) {
	ret := ch.now()
	if !in.read && out.class == unknown {
		ret = math.MaxInt64 // it may take effect at any time after its call
	}
	ch.mu.Lock()
	ch.history = append(ch.history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	ch.mu.Unlock()
}

// node returns a node that is up, or nil.
func (ch *chaos) node(rng *rand.Rand) (*receipt.Service, *chaosNode) {
	for range chaosNodes {
		n := ch.nodes[rng.IntN(chaosNodes)]
		n.mu.Lock()
		svc, up := n.svc, n.up
		n.mu.Unlock()
		if up {
			return svc, n
		}
	}
	return nil, nil
}

func (ch *chaos) clientStep(client int, rng *rand.Rand) {
	if rng.IntN(4) == 0 {
		ch.read(client, rng.IntN(chaosDocs), rng.Uint64())
		return
	}
	ch.batch(client, int(ch.window.Load())+rng.IntN(chaosWindow), rng.Uint64())
}

func chaosBatch(key int) *table.Batch {
	b, err := table.DecodeBatch([]byte(fmt.Sprintf(`{"inserts":[{"id":"mark-%d","doc":{}}],"transforms":[{"id":"c%d","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`, key, key%chaosDocs)))
	if err != nil {
		panic(err)
	}
	return b
}

func (ch *chaos) batch(client, key int, pick uint64) chaosOut {
	if sessionKey(key) {
		return ch.sessionOp(client, key, pick)
	}
	svc, _ := ch.node(rand.New(rand.NewPCG(pick, 1)))
	return ch.batchOn(svc, client, key)
}

// batchOn sends key's batch to svc (nil: no node was up) and records it.
func (ch *chaos) batchOn(svc *receipt.Service, client, key int) chaosOut {
	in := chaosIn{key: key, doc: key % chaosDocs}
	call := ch.now()
	out := chaosOut{class: unknown}
	if svc != nil {
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		a, err := svc.Execute(actx, receipt.Request{Principal: "alice", Table: "t", Key: fmt.Sprint(key), Batch: chaosBatch(key), Wait: 2 * time.Second})
		cancel()
		if err == nil && a.Terminal {
			out.env = fmt.Sprintf("%d %s %s %s %s", a.Status, a.Outcome, a.Code, a.TxnID, a.Result)
			switch a.Outcome {
			case receipt.OutcomeCommitted:
				out.class = committed
			case receipt.OutcomeAborted, receipt.OutcomeNotApplied:
				out.class = notApplied
			}
		}
	}
	ch.record(client, in, call, out)
	return out
}

func (ch *chaos) read(client, doc int, pick uint64) {
	rng := rand.New(rand.NewPCG(pick, 2))
	svc, _ := ch.node(rng)
	if svc == nil {
		return
	}
	call := ch.now()
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	raw, err := svc.Tables().Get(actx, "alice", "t", fmt.Sprintf("c%d", doc))
	cancel()
	var ce *code.Error
	value := 0
	switch {
	case errors.As(err, &ce) && ce.Code == code.DocumentNotFound:
	case err != nil:
		return // a failed read says nothing
	default:
		var d struct{ N int }
		if json.Unmarshal(raw, &d) != nil {
			ch.t.Errorf("counter c%d: %s", doc, raw)
			return
		}
		value = d.N
	}
	ch.record(client, chaosIn{read: true, doc: doc}, call, chaosOut{value: value})
}

// schedule runs faults for d: one step per chaosFaultEvery, each a fault
// or a heal, keeping a quorum of members up. It returns the faults run.
func (ch *chaos) schedule(d time.Duration) map[string]int {
	ran := map[string]int{}
	memberDown, nodeDown := -1, -1
	var linkBroken []int
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		waitAWhile(chaosFaultEvery)
		ch.window.Store(min(ch.window.Load()+chaosWindow/2, chaosKeys-chaosWindow))
		switch r := ch.rng.IntN(10); {
		case r < 2 && memberDown < 0:
			i := ch.rng.IntN(3)
			if ch.rng.IntN(2) == 0 {
				if l, err := ch.c.Leader(ctx); err == nil {
					i = l
					ran["stop-leader"]++
				}
			} else {
				ran["stop-member"]++
			}
			ch.c.Stop(i)
			memberDown = i
		case r < 3 && memberDown >= 0:
			ch.c.Restart(ch.t, memberDown)
			memberDown = -1
			ran["restart-member"]++
		case r < 5 && len(linkBroken) < 2:
			i := ch.rng.IntN(3)
			switch ch.rng.IntN(3) {
			case 0:
				ch.c.Link(i).Cut()
				ran["cut"]++
			case 1:
				ch.c.Link(i).Blackhole()
				ran["blackhole"]++
			default:
				ch.c.Link(i).Delay(time.Duration(10+ch.rng.IntN(90)) * time.Millisecond)
				ran["delay"]++
			}
			linkBroken = append(linkBroken, i)
		case r < 7 && len(linkBroken) > 0:
			ch.c.Link(linkBroken[0]).Heal()
			linkBroken = linkBroken[1:]
			ran["heal"]++
		case r < 8 && nodeDown < 0:
			nodeDown = ch.rng.IntN(chaosNodes)
			if ch.rng.IntN(2) == 0 && !slices.Contains(linkBroken, nodeDown) && memberDown != nodeDown {
				ch.crashMidRequest(nodeDown)
				linkBroken = append(linkBroken, nodeDown)
				ran["crash-owner-mid-request"]++
				break
			}
			ran["crash-node"]++
			ch.crash(nodeDown)
		case r < 9 && nodeDown >= 0:
			// A process restarts on a working network: it must open
			// (bump its incarnation) before it serves.
			if j := slices.Index(linkBroken, nodeDown); j >= 0 {
				ch.c.Link(nodeDown).Heal()
				linkBroken = slices.Delete(linkBroken, j, j+1)
			}
			if memberDown == nodeDown { // its only member, too
				ch.c.Restart(ch.t, memberDown)
				memberDown = -1
			}
			ch.start(nodeDown)
			ch.restarts++
			nodeDown = -1
		}
	}
	return ran
}

func (ch *chaos) healAll() {
	for i := range 3 {
		ch.c.Link(i).Heal()
	}
	var down []int
	for i := range 3 {
		if !ch.c.Running(i) {
			down = append(down, i)
		}
	}
	if len(down) > 0 {
		ch.c.Restart(ch.t, down...)
	}
	for i, n := range ch.nodes {
		n.mu.Lock()
		up := n.up
		n.mu.Unlock()
		if !up {
			ch.start(i)
			ch.restarts++
		}
	}
}

// settle runs maintenance on every node until a pass finds nothing left
// to finish: crashed owners' receipts adopted (after their leases
// expire) and made terminal.
// terminalAfterHealing sends key k until it gets a terminal answer, for at
// most chaosSettle: once healed the system must answer every key, but one
// attempt's budget (3 s) says nothing on a machine loaded enough that an
// etcd round trip takes seconds. Every attempt is in the history.
func (ch *chaos) terminalAfterHealing(k int) {
	ch.t.Helper()
	testsupport.Poll(ch.t, fmt.Sprintf("key %d to get a terminal answer after healing", k), chaosSettle, func() bool {
		return ch.batch(chaosClients, k, 0).class != unknown
	})
}

func (ch *chaos) settle() {
	testsupport.Poll(ch.t, "every receipt terminal after healing", chaosSettle, func() bool {
		quiet := true
		for _, n := range ch.nodes {
			ms, err := n.svc.MaintainOnce(ctx)
			if err != nil || ms.Deferred > 0 || ms.Adopted > 0 || ms.Terminal > 0 {
				quiet = false
			}
		}
		return quiet
	})
}

func (ch *chaos) check() {
	ch.t.Helper()
	res, info := porcupine.CheckOperationsVerbose(chaosModel(), resolveUnknowns(ch.history), chaosCheckTimeout)
	switch res {
	case porcupine.Ok:
	case porcupine.Unknown:
		ch.t.Fatalf("porcupine could not decide the history within %v: counted as a failure", chaosCheckTimeout)
	default:
		path := filepath.Join(os.TempDir(), fmt.Sprintf("idem-chaos-%d.html", time.Now().UnixNano()))
		if err := porcupine.VisualizePath(chaosModel(), info, path); err != nil {
			path = "(not written: " + err.Error() + ")"
		}
		ch.t.Fatalf("the history is not linearizable: a batch applied twice, a committed one not at all, or a read saw what was not linearized (%d operations; porcupine's view: %s)", len(ch.history), path)
	}
	first := map[int]string{}
	for _, op := range ch.history {
		in, out := op.Input.(chaosIn), op.Output.(chaosOut)
		if in.read || out.class == unknown {
			continue
		}
		if f, ok := first[in.key]; !ok {
			first[in.key] = out.env
		} else if f != out.env {
			ch.t.Fatalf("key %d: answers %q then %q: a retry must get the first terminal answer", in.key, f, out.env)
		}
	}
}

// resolveUnknowns gives each batch whose answer was lost the outcome its
// key's receipt ended with (every key gets a terminal answer after the
// healing): the batch still may take effect at any time after its call,
// but only as its receipt says — applied, or never. That is the truth the
// receipt holds, and it spares porcupine a branch per lost answer, which
// on a history with many (one seed had 87) it could not search in time.
func resolveUnknowns(h []porcupine.Operation) []porcupine.Operation {
	final := map[int]outcomeClass{}
	for _, op := range h {
		if in, out := op.Input.(chaosIn), op.Output.(chaosOut); !in.read && out.class != unknown {
			final[in.key] = out.class
		}
	}
	out := make([]porcupine.Operation, len(h))
	for i, op := range h {
		in, o := op.Input.(chaosIn), op.Output.(chaosOut)
		if c, ok := final[in.key]; ok && !in.read && o.class == unknown {
			o.class = c // env stays "": not a terminal answer anyone saw
			op.Output = o
		}
		out[i] = op
	}
	return out
}

// chaosState is one counter's value and which keys' batches applied to it.
type chaosState struct {
	value   int
	applied uint64
}

// chaosModel: partitioned by counter; a batch increments its counter at
// most once; committed means it did (by its return), not-applied that it
// never does, unknown that it may, at any time after its call.
func chaosModel() porcupine.Model {
	nd := porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := make([][]porcupine.Operation, chaosDocs)
			for _, op := range h {
				d := op.Input.(chaosIn).doc
				by[d] = append(by[d], op)
			}
			return by
		},
		Init: func() []interface{} { return []interface{}{chaosState{}} },
		Step: func(state, input, output interface{}) []interface{} {
			s, in, out := state.(chaosState), input.(chaosIn), output.(chaosOut)
			if in.read {
				if out.value == s.value {
					return []interface{}{s}
				}
				return nil
			}
			bit := uint64(1) << uint(in.key/chaosDocs)
			done := s.applied&bit != 0
			applied := chaosState{value: s.value + 1, applied: s.applied | bit}
			switch {
			case done:
				if out.class == notApplied {
					return nil
				}
				return []interface{}{s}
			case out.class == committed:
				return []interface{}{applied}
			case out.class == notApplied:
				return []interface{}{s}
			}
			return []interface{}{s, applied}
		},
		Hash: func(state interface{}) uint64 {
			s := state.(chaosState)
			return uint64(s.value)*0x9e3779b97f4a7c15 ^ s.applied
		},
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(chaosIn), output.(chaosOut)
			if in.read {
				return fmt.Sprintf("read(c%d) -> %d", in.doc, out.value)
			}
			return fmt.Sprintf("batch(k%d) -> %d %s", in.key, out.class, out.env)
		},
	}
	return nd.ToModel()
}

// TestChaosModel_RefusesWhatExactlyOnceForbids: the checker has teeth — a
// batch counted twice, a committed batch a later read does not see, and a
// not-applied batch a read does see are each refused; unknown may go
// either way.
func TestChaosModel_RefusesWhatExactlyOnceForbids(t *testing.T) {
	batch := func(client, key int, class outcomeClass, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: chaosIn{key: key, doc: 0}, Call: call, Output: chaosOut{class: class}, Return: ret}
	}
	read := func(client, value int, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: chaosIn{read: true, doc: 0}, Call: call, Output: chaosOut{value: value}, Return: ret}
	}
	for _, c := range []struct {
		name string
		h    []porcupine.Operation
		ok   bool
	}{
		{"committed then seen", []porcupine.Operation{batch(0, 0, committed, 1, 2), read(1, 1, 3, 4)}, true},
		{"committed, retried, seen once", []porcupine.Operation{batch(0, 0, committed, 1, 2), batch(1, 0, committed, 3, 4), read(2, 1, 5, 6)}, true},
		{"applied twice", []porcupine.Operation{batch(0, 0, committed, 1, 2), batch(1, 0, committed, 3, 4), read(2, 2, 5, 6)}, false},
		{"committed, not seen", []porcupine.Operation{batch(0, 0, committed, 1, 2), read(1, 0, 3, 4)}, false},
		{"not applied, seen", []porcupine.Operation{batch(0, 0, notApplied, 1, 2), read(1, 1, 3, 4)}, false},
		{"unknown, seen later", []porcupine.Operation{batch(0, 0, unknown, 1, math.MaxInt64), read(1, 0, 2, 3), read(1, 1, 4, 5)}, true},
		{"unknown, seen then unseen", []porcupine.Operation{batch(0, 0, unknown, 1, math.MaxInt64), read(1, 1, 2, 3), read(1, 0, 4, 5)}, false},
		// A lost answer takes its key's final outcome (resolveUnknowns).
		{"lost, key committed later, seen", []porcupine.Operation{batch(0, 0, unknown, 1, math.MaxInt64), read(1, 1, 2, 3), batch(1, 0, committed, 4, 5)}, true},
		{"lost, key not applied, seen", []porcupine.Operation{batch(0, 0, unknown, 1, math.MaxInt64), read(1, 1, 2, 3), batch(1, 0, notApplied, 4, 5)}, false},
		{"lost, key committed, never seen", []porcupine.Operation{batch(0, 0, unknown, 1, math.MaxInt64), batch(1, 0, committed, 2, 3), read(1, 0, 4, 5)}, false},
	} {
		if got := porcupine.CheckOperations(chaosModel(), resolveUnknowns(c.h)); got != c.ok {
			t.Errorf("%s: linearizable=%v, want %v", c.name, got, c.ok)
		}
	}
}
