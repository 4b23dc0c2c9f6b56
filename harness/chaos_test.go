package harness

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/apitest"
)

// Process-level chaos (issue 6, item 4): the real idemd binary on a data
// directory, crashed at a catalog failpoint armed through GO_FAILPOINTS (or
// SIGKILLed mid-stream) while concurrent clients send keyed batches, then
// restarted without failpoints. Every key must converge to one terminal
// answer that every later answer replays byte for byte, and the documents
// must agree with the answers: the shared counter equals the number of
// committed keys, a key's marker document exists exactly when it committed.
//
// A `panic` failpoint crashes idemd wherever it fires: in the WAL writer
// goroutine as any panic does, and in a request goroutine because idemd
// turns a handler panic into a crash (net/http alone would recover it).

var flagChaosSeed = flag.Uint64("chaos.seed", 0, "seed of the process chaos test's choices (0: from the clock)")

func TestMain(m *testing.M) {
	code := m.Run()
	apitest.RemoveBuilds()
	os.Exit(code)
}

type crashMode int

const (
	processCrash crashMode = iota // the failpoint panics: the process dies by itself
	killAfter                     // no failpoint: SIGKILL after a random number of answers
)

type chaosVariant struct {
	name  string
	fp    string // failpoint armed in the crashing process ("" for none)
	terms string // pingcap modifiers before its panic action, e.g. "5%"
	// crashWithin, if set, replaces terms by a count: the failpoint lets
	// pass a number of evaluations drawn from the seed in
	// [0, crashWithin) and panics at the next. For a failpoint only some
	// requests reach — the chain's, which conflicting requests leave for
	// the two-write path — a probability made the crash depend on how many
	// chains succeeded: under load, few enough for 600 keys to pass it by.
	crashWithin int
	mode        crashMode
	// tableFirst creates the table in an earlier, failpoint-free process:
	// the failpoint would also fire on that write (and on startup writes).
	tableFirst bool
	// unknownEnds is the terminal outcome at least one key whose answer
	// was lost to the crash must reach ("" for no requirement): the
	// request stopped at the failpoint finishes that way after restart.
	unknownEnds string
	// invalidEvery, if set, makes every invalidEvery-th key of a client
	// also $inc a string (document chaosString): a transform invalid
	// against the document it finds, the real conflict that is still a
	// participant's "no" vote once contention is waited out (issue 37).
	invalidEvery int
	// args are extra idemd flags of the crashing process.
	args []string
}

var chaosVariants = []chaosVariant{
	// Receipt started, intents prepared, no decision: the successor
	// commits it (commit-prepared) without the client re-executing. The
	// decision must be a write of its own for a crash to fall between.
	{name: "started", fp: fault.ReceiptDecideBefore, terms: "5%", mode: processCrash, unknownEnds: "committed",
		args: []string{"-separate-decide"}},
	// Decision (with the terminal receipt, or with the started receipt of
	// a refused batch) durable, the caller never told.
	{name: "decided", fp: fault.TwoPCDecideAfter, terms: "5%", mode: processCrash, args: []string{"-separate-decide"}},
	// The default chained write (receipt, prepares, decision, terminal
	// envelope in one fsync) durable, the caller never told.
	{name: "chain-durable", fp: fault.TwoPCChainAfter, crashWithin: 10, mode: processCrash},
	// A participant's "no" vote: abort decision durable with the started
	// receipt, terminal publication never happened. Reached by the keys
	// that $inc a string (contention on the shared counter is waited out
	// since issue 37, and no longer votes no); recovery publishes the
	// exact envelope.
	{name: "decided-unpublished", fp: fault.ReceiptTerminalBefore, terms: "25%", mode: processCrash, unknownEnds: "aborted",
		invalidEvery: 4},
	// The WAL writer dies after an fsync, before anyone was told.
	{name: "wal-synced-untold", fp: fault.WALSyncAfter, terms: "3%", mode: processCrash, tableFirst: true},
	// Plain SIGKILL in the middle of the stream.
	{name: "sigkill", mode: killAfter},
}

const (
	chaosClients     = 4
	chaosKeysMax     = 600 // per variant: bounds the stream if a crash is late
	chaosCrashWait   = 15 * time.Second
	chaosConvergeFor = 20 * time.Second
	chaosTable       = "t"
	chaosCounter     = "c"
	chaosString      = "str" // a document whose s is a string (chaosVariant.invalidEvery)
)

// TestChaos_ProcessCrashesAtFailpointsConverge: for each variant, crash a
// real idemd mid-stream, restart it, and check convergence, byte-identical
// replays and documents over HTTP.
func TestChaos_ProcessCrashesAtFailpointsConverge(t *testing.T) {
	apitest.BuildIdemd(t) // before the parallel subtests start their clocks
	seed := *flagChaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	// The seed picks the SIGKILL point; failpoint probabilities are drawn
	// inside the child.
	t.Logf("chaos seed %d (-chaos.seed=%d repeats the test's own choices)", seed, seed)
	for i, v := range chaosVariants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			runChaos(t, v, seed+uint64(i))
		})
	}
}

// chaosKey is one idempotency key and every answer it got, in order. A key
// is used by one goroutine at a time (a stream client, then a converger).
type chaosKey struct {
	key, body string
	answers   []*apitest.Response // nil entries: transport errors
	errs      []error
}

func (k *chaosKey) record(r *apitest.Response, err error) {
	k.answers = append(k.answers, r)
	k.errs = append(k.errs, err)
}

// firstTerminal is the index of k's first terminal answer (-1: none).
func (k *chaosKey) firstTerminal() int {
	for i, r := range k.answers {
		if r != nil && apitest.TerminalOutcome(r) != "" {
			return i
		}
	}
	return -1
}

// stream is the client workload against the crashing process.
type stream struct {
	variant      string
	invalidEvery int // chaosVariant.invalidEvery
	mu           sync.Mutex
	keys         []*chaosKey
	stopped      chan struct{}
	wg           sync.WaitGroup
	once         sync.Once

	answered atomic.Int64
	reachN   int64
	reached  chan struct{}
}

func (s *stream) newKey(client, n int) *chaosKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.keys) >= chaosKeysMax {
		return nil
	}
	key := fmt.Sprintf("%s-c%d-%03d", s.variant, client, n)
	// $inc on the shared counter (upsert) and a marker document unique to
	// the key: the marker exists exactly when the key committed.
	invalid := ""
	if s.invalidEvery > 0 && n%s.invalidEvery == s.invalidEvery-1 {
		invalid = fmt.Sprintf(`,{"id":%q,"ops":[{"op":"$inc","path":"s","value":1}]}`, chaosString)
	}
	body := fmt.Sprintf(`{"inserts":[{"id":"m-%s","doc":{"key":%q}}],"transforms":[{"id":%q,"ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}%s]}`,
		key, key, chaosCounter, invalid)
	k := &chaosKey{key: key, body: body}
	s.keys = append(s.keys, k)
	return k
}

func (s *stream) run(c *apitest.Client) {
	for i := range chaosClients {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-s.stopped:
					return
				default:
				}
				k := s.newKey(i, n)
				if k == nil {
					return
				}
				r, err := c.Try("POST", "/v1/tables/"+chaosTable+"/batch", k.body, "Idempotency-Key", k.key)
				k.record(r, err)
				if err != nil {
					// This request met the crash (or the failpoint's
					// panic closed its connection): stop until the
					// process is gone, keeping the keys that never
					// reached any server few.
					<-s.stopped
					return
				}
				if s.answered.Add(1) == s.reachN {
					close(s.reached)
				}
			}
		}()
	}
}

// stop ends the stream and waits for every client.
func (s *stream) stop() {
	s.once.Do(func() { close(s.stopped) })
	s.wg.Wait()
}

func runChaos(t *testing.T, v chaosVariant, seed uint64) {
	began := time.Now()
	rng := rand.New(rand.NewPCG(seed, 0x6368616f73))
	data := t.TempDir()
	c := apitest.NewClient(t, "http://unused")
	marker := "failpoint panic: " + v.fp
	var env []string
	if v.fp != "" {
		terms := v.terms
		if v.crashWithin > 0 {
			terms = fmt.Sprintf("%d*off->", rng.IntN(v.crashWithin))
		}
		env = []string{fmt.Sprintf("GO_FAILPOINTS=%s=%spanic(%q)", v.fp, terms, v.fp)}
	}

	if v.tableFirst {
		p0 := apitest.Start(t, c, data, nil)
		c.WithBase(p0.Base()).Do("PUT", "/v1/tables/"+chaosTable, nil).JSON(t, 201, nil)
		p0.Term()
	}
	p1, startCrashes := launchCrashing(t, c, data, env, v)
	// Fresh connections: net/http would otherwise resend a keyed request
	// whose reused connection the panic closed, to the still-live process.
	c1 := c.WithFreshConnections().WithBase(p1.Base())
	if !v.tableFirst {
		c1.Do("PUT", "/v1/tables/"+chaosTable, nil).JSON(t, 201, nil)
	}

	if v.invalidEvery > 0 {
		c1.Do("POST", "/v1/tables/"+chaosTable+"/batch", `{"inserts":[{"id":"`+chaosString+`","doc":{"s":"not a number"}}]}`).JSON(t, 201, nil)
	}
	s := &stream{variant: v.name, stopped: make(chan struct{}), reached: make(chan struct{}),
		reachN: 8 + rng.Int64N(33), invalidEvery: v.invalidEvery}
	t.Cleanup(s.stop) // never leave a client running past the test
	s.run(c1)
	timer := time.NewTimer(chaosCrashWait)
	defer timer.Stop()
	switch v.mode {
	case processCrash:
		select {
		case <-p1.Exited():
		case <-timer.C:
			s.stop()
			t.Fatalf("the failpoint %s never crashed the process (%d keys sent)", v.fp, len(s.keys))
		}
		ws, _ := p1.State().Sys().(syscall.WaitStatus)
		if ws.Signaled() || ws.ExitStatus() != 2 || !strings.Contains(p1.Logs(), "panic: "+marker) {
			t.Fatalf("the process did not die of the failpoint panic: %v", p1.State())
		}
	case killAfter:
		select {
		case <-s.reached:
		case <-p1.Exited():
			t.Fatalf("idemd exited on its own: %v", p1.State())
		case <-timer.C:
			s.stop()
			t.Fatalf("only %d answers within %v", s.answered.Load(), chaosCrashWait)
		}
		p1.Kill()
	}
	s.stop()
	crashedAt := time.Since(began)
	if v.fp != "" && !strings.Contains(p1.Logs(), marker) {
		t.Fatalf("no %q in the crashed process's log", marker)
	}
	if strings.Contains(p1.Logs(), "failpoint panic") && v.fp == "" {
		t.Fatalf("a failpoint fired without being armed")
	}
	keys := s.keys
	if len(keys) == 0 {
		t.Fatal("no key was sent before the crash")
	}

	// Restart without failpoints; a short lease TTL so background
	// maintenance runs too (the new incarnation may adopt at once anyway).
	p2 := apitest.Start(t, c, data, nil, "-lease-ttl", "2s", "-maintain-interval", "1s")
	restartedAt := time.Since(began)
	c2 := c.WithBase(p2.Base())
	converge(t, c2, keys)
	convergedAt := time.Since(began)
	if t.Failed() {
		t.FailNow()
	}

	outcomes := map[string]int{}
	committed := map[string]bool{}
	unknownEnds := map[string]int{} // outcome of keys whose first attempt got no answer
	afterRestart := 0               // keys whose first terminal answer came from the restarted process
	for _, k := range keys {
		checkKeyAnswers(t, k)
		f := k.firstTerminal()
		if f < 0 {
			continue // reported by checkKeyAnswers
		}
		o := apitest.TerminalOutcome(k.answers[f])
		outcomes[o]++
		committed[k.key] = o == "committed"
		if k.answers[0] == nil {
			unknownEnds[o]++
		}
		if f > 0 { // the stream sent each key once
			afterRestart++
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if v.unknownEnds != "" && unknownEnds[v.unknownEnds] == 0 {
		t.Fatalf("no key lost to the crash ended %s (keys lost: %v): the failpoint's request was not among them", v.unknownEnds, unknownEnds)
	}
	if v.mode != killAfter && len(unknownEnds) == 0 {
		t.Fatal("no key lost its answer to the crash")
	}
	checkDocuments(t, c2, keys, committed)
	checkedAt := time.Since(began)
	c2.CloseIdleConnections()
	p2.Term()
	if c.Tr.Recorded() == 0 {
		t.Fatal("no exchange was recorded for the contract check")
	}
	t.Logf("%s: %d keys: %d answered terminal before the crash, %d lost to it (ended %v), outcomes %v; "+
		"%d startup crashes; crash at %v, restarted at %v, converged at %v, checked at %v, total %v",
		v.name, len(keys), len(keys)-afterRestart, sum(unknownEnds), unknownEnds, outcomes, startCrashes,
		ms(crashedAt), ms(restartedAt), ms(convergedAt), ms(checkedAt), ms(time.Since(began)))
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// launchCrashing starts the process with the failpoint armed. A WAL
// failpoint armed by probability may fire on a startup write (the
// incarnation bump) before the process listens: that is a crash too, and
// the next start recovers from it; start again until one listens.
func launchCrashing(t *testing.T, c *apitest.Client, data string, env []string, v chaosVariant) (*apitest.Proc, int) {
	t.Helper()
	for crashes := 0; ; crashes++ {
		p, err := apitest.TryLaunch(t, data, env, v.args...)
		if err == nil {
			p.WaitHealthy(c)
			return p, crashes
		}
		early, ok := err.(*apitest.EarlyExit)
		if !ok || !v.tableFirst || crashes >= 10 || !strings.Contains(early.Proc.Logs(), "failpoint panic: "+v.fp) {
			t.Fatal(err)
		}
	}
}

// converge retries every key with Prefer: wait=5 until its answer is
// terminal, then once more for a replay, all within chaosConvergeFor.
func converge(t *testing.T, c *apitest.Client, keys []*chaosKey) {
	deadline := time.Now().Add(chaosConvergeFor)
	work := make(chan *chaosKey)
	var wg sync.WaitGroup
	for range 2 * chaosClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				convergeKey(t, c, k, deadline)
			}
		}()
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
}

func convergeKey(t *testing.T, c *apitest.Client, k *chaosKey, deadline time.Time) {
	path := "/v1/tables/" + chaosTable + "/batch"
	for k.firstTerminal() < 0 {
		if time.Now().After(deadline) {
			t.Errorf("key %s did not converge within %v: %s", k.key, chaosConvergeFor, describe(k))
			return
		}
		r, err := c.Try("POST", path, k.body, "Idempotency-Key", k.key, "Prefer", "wait=5")
		k.record(r, err)
		if err == nil && apitest.TerminalOutcome(r) == "" && r.Status < 500 && r.Status != 409 && r.Status != 429 {
			t.Errorf("key %s: unexpected non-terminal answer %d %s", k.key, r.Status, r.Body)
			return
		}
		if err != nil || apitest.TerminalOutcome(r) == "" {
			// An answer that did not wait (pending after an ambiguous
			// write): poll again shortly, bounded by the deadline.
			time.Sleep(20 * time.Millisecond)
		}
	}
	r, err := c.Try("POST", path, k.body, "Idempotency-Key", k.key)
	k.record(r, err)
}

// checkKeyAnswers: k has a terminal answer; every answer before it is a
// retryable same-key answer (pending, or the store's fail-stop) or lost;
// every answer after it is the same answer, replayed.
func checkKeyAnswers(t *testing.T, k *chaosKey) {
	t.Helper()
	f := k.firstTerminal()
	if f < 0 {
		t.Errorf("key %s never got a terminal answer: %s", k.key, describe(k))
		return
	}
	if f == len(k.answers)-1 {
		t.Errorf("key %s: no replay after its terminal answer", k.key)
	}
	first := k.answers[f]
	txn := first.Header.Get("Idem-Transaction-Id")
	if len(txn) != 32 || first.Header.Get("Idempotency-Key") != k.key {
		t.Errorf("key %s: terminal answer headers %v", k.key, first.Header)
	}
	for i, r := range k.answers[:f] {
		if r == nil {
			continue
		}
		var p apitest.Problem
		err := json.Unmarshal(r.Body, &p)
		pending := err == nil && p.Outcome == "pending" && r.Header.Get("Idem-Transaction-Id") == txn
		// A request that reaches the store between a WAL failpoint's
		// fail-stop and the process's death is refused: 503 unavailable,
		// bound to the key's transaction, retry with the same key (its
		// outcome, when given, is not terminal).
		failStopped := err == nil && r.Status == 503 && p.Code == "unavailable" &&
			r.Header.Get("Idempotency-Key") == k.key && (p.TransactionID == "" || p.TransactionID == txn) &&
			(p.Outcome == "" || p.Outcome == "pending" || p.Outcome == "not_applied")
		if !(pending || failStopped) || !p.Retryable || p.RetryWith != "same_key" {
			t.Errorf("key %s: answer %d before the terminal one is not a same-key retry: %d %v %s", k.key, i, r.Status, r.Header, r.Body)
		}
	}
	if apitest.TerminalOutcome(first) == "committed" && string(first.Body) != `{"inserted":1,"deleted":0,"transformed":1}` {
		t.Errorf("key %s: committed body %s", k.key, first.Body)
	}
	for i := f + 1; i < len(k.answers); i++ {
		r := k.answers[i]
		if r == nil {
			t.Errorf("key %s: answer %d after the terminal one failed: %v", k.key, i, k.errs[i])
			continue
		}
		if r.Status != first.Status || !bytes.Equal(r.Body, first.Body) ||
			r.Header.Get("Content-Type") != first.Header.Get("Content-Type") ||
			r.Header.Get("Idem-Transaction-Id") != txn || r.Header.Get("Idempotency-Key") != k.key ||
			r.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("key %s: answer %d differs from the first terminal answer %d:\n got  %d %v %s\n want %d %v %s",
				k.key, i, f, r.Status, r.Header, r.Body, first.Status, first.Header, first.Body)
		}
	}
}

// checkDocuments: the counter equals the number of committed keys, each
// committed key's marker exists and no other key's does, and every receipt
// is terminal with the outcome its answers gave.
func checkDocuments(t *testing.T, c *apitest.Client, keys []*chaosKey, committed map[string]bool) {
	t.Helper()
	n := 0
	for _, ok := range committed {
		if ok {
			n++
		}
	}
	var doc struct {
		Doc map[string]any `json:"doc"`
	}
	r := c.Do("GET", "/v1/tables/"+chaosTable+"/docs/"+chaosCounter, nil)
	if n == 0 {
		r.Problem(t, 404)
	} else {
		r.JSON(t, 200, &doc)
		if doc.Doc["n"] != float64(n) {
			t.Errorf("counter %v, want %d (the number of committed keys)", doc.Doc["n"], n)
		}
	}
	var missing, extra []string
	for _, k := range keys {
		r := c.Do("GET", "/v1/tables/"+chaosTable+"/docs/m-"+k.key, nil)
		switch {
		case committed[k.key] && r.Status != 200:
			missing = append(missing, k.key)
		case !committed[k.key] && r.Status != 404:
			extra = append(extra, k.key)
		}
		var rv struct {
			State    string `json:"state"`
			Envelope struct {
				Status  int    `json:"status"`
				Outcome string `json:"outcome"`
			} `json:"envelope"`
		}
		c.Do("GET", "/v1/receipts/"+chaosTable+"/"+k.key, nil).JSON(t, 200, &rv)
		first := k.answers[k.firstTerminal()]
		if rv.State != "terminal" || rv.Envelope.Status != first.Status || rv.Envelope.Outcome != apitest.TerminalOutcome(first) {
			t.Errorf("receipt of %s: %+v; its terminal answer was %d %s", k.key, rv, first.Status, first.Body)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) > 0 {
		t.Errorf("marker documents: missing for committed keys %v, present for uncommitted keys %v", missing, extra)
	}
}

func describe(k *chaosKey) string {
	var b strings.Builder
	for i, r := range k.answers {
		if r == nil {
			fmt.Fprintf(&b, "\n  [%d] error: %v", i, k.errs[i])
			continue
		}
		fmt.Fprintf(&b, "\n  [%d] %d replayed=%q %s", i, r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
	}
	return b.String()
}
