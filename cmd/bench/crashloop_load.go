package main

// The crashloop suite's steady keyed load and its exactly-once check.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// crashLoad is the steady keyed load: every client posts call i of its own
// (a new key and ten new documents), and retries it with the same key and
// body until it is acknowledged (201): the exactly-once contract. An answer
// that says retry_with new_key ends the key unacknowledged.
type crashLoad struct {
	clients int
	seed    uint64
	wl      *workload
	base    atomic.Pointer[string] // the current process's http://addr
	client  *http.Client
	tr      *http.Transport

	stop    atomic.Bool
	stopped time.Time // when stop was set (read only after it)
	wg      sync.WaitGroup
	cancel  context.CancelFunc

	ackMu sync.Mutex
	acked []ackRef // acknowledged calls, in acknowledgement order
	hists []*hdrhistogram.Histogram

	failOnce sync.Once
	failed   chan struct{}
	firstErr error

	// Counters of attempts that did not get a 201.
	attempts, retries                           atomic.Uint64
	refused, reset, netOther                    atomic.Uint64
	s503, s409, s429, s500                      atomic.Uint64
	newKey, abandoned, firstReplays, retryAcked atomic.Uint64
	retryReplays                                atomic.Uint64
}

type ackRef struct {
	w  int32
	i  uint64
	at int64 // unix nanoseconds of the acknowledgement
}

func newCrashLoad(env *Env, o CrashloopOptions) *crashLoad {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        o.Clients * 2,
		MaxIdleConnsPerHost: o.Clients * 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	}
	wl := newWorkload(env.Opts.BatchDocs)
	if o.Docs > 0 {
		wl.perWorker = uint64(max(o.Docs/o.Clients, 10*env.Opts.BatchDocs))
	}
	l := &crashLoad{clients: o.Clients, seed: o.Seed, wl: wl,
		client: &http.Client{Transport: tr, Timeout: time.Minute}, tr: tr, failed: make(chan struct{})}
	for range o.Clients {
		l.hists = append(l.hists, newHist())
	}
	return l
}

func (l *crashLoad) fail(err error) {
	l.failOnce.Do(func() { l.firstErr = err; close(l.failed) })
}

func (l *crashLoad) err() error {
	select {
	case <-l.failed:
		return l.firstErr
	default:
		return nil
	}
}

func (l *crashLoad) ackedCount() int {
	l.ackMu.Lock()
	defer l.ackMu.Unlock()
	return len(l.acked)
}

func (l *crashLoad) start(ctx context.Context) {
	ctx, l.cancel = context.WithCancel(ctx)
	for w := range l.clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.client1(ctx, w)
		}()
	}
}

// stopAndWait ends the load: clients finish the key in hand (for up to
// 10 s, then abandon it) and return. Idempotent.
func (l *crashLoad) stopAndWait() {
	if l.stop.Load() {
		return
	}
	l.stopped = time.Now()
	l.stop.Store(true)
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		l.cancel()
		<-done
	}
	l.cancel()
	l.tr.CloseIdleConnections()
}

// answer is what one attempt got.
type answer struct {
	status    int
	replayed  bool
	code      string
	retryWith string
}

func (l *crashLoad) post(ctx context.Context, base, key string, body []byte) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/tables/"+crashTable+"/batch", bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := l.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	if a.status != http.StatusCreated {
		var p struct {
			Code      string `json:"code"`
			RetryWith string `json:"retry_with"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&p)
		a.code, a.retryWith = p.Code, p.RetryWith
	}
	io.Copy(io.Discard, resp.Body) // so the connection goes back to the pool
	resp.Body.Close()
	return a, nil
}

// client1 is one client's loop: keys one after another, each retried
// until it has a final answer.
func (l *crashLoad) client1(ctx context.Context, w int) {
	rng := rand.New(rand.NewPCG(l.seed, uint64(w)+1))
	var buf []byte
	for i := uint64(0); !l.stop.Load() && ctx.Err() == nil; i++ {
		buf = l.wl.appendBody(buf[:0], w, i)
		if !l.sendKey(ctx, rng, w, i, buf) {
			return
		}
	}
}

// sendKey posts worker w's i-th key until it is acknowledged or refused
// for good, backing off between attempts; false stops the client (the
// load ended, or an answer broke the contract).
func (l *crashLoad) sendKey(ctx context.Context, rng *rand.Rand, w int, i uint64, body []byte) bool {
	key := l.wl.key(w, i)
	t0 := time.Now()
	backoff := crashRetryMin
	for attempt := 0; ; attempt++ {
		l.attempts.Add(1)
		if attempt > 0 {
			l.retries.Add(1)
		}
		a, err := l.post(ctx, *l.base.Load(), key, body)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return false
			}
			l.countNetError(err)
		case a.status == http.StatusCreated:
			l.acknowledged(w, i, attempt, a.replayed, t0)
			return true
		case a.retryWith == "new_key":
			l.newKey.Add(1) // final and not applied: the next call has a new key
			return true
		case a.retryWith == "same_key" || a.status == http.StatusServiceUnavailable:
			l.countRetryStatus(a.status)
		default:
			l.fail(fmt.Errorf("POST key %s: status %d code %q retry_with %q: not an answer to retry", key, a.status, a.code, a.retryWith))
			return false
		}
		if l.stop.Load() && time.Since(l.stopped) > 10*time.Second {
			l.abandoned.Add(1)
			return false
		}
		if time.Since(t0) > crashKeyGiveUp {
			l.fail(fmt.Errorf("key %s not acknowledged within %v of retries (last: status %d, %v)", key, crashKeyGiveUp, a.status, err))
			return false
		}
		d := backoff/2 + time.Duration(rng.Int64N(int64(backoff)))
		backoff = min(2*backoff, crashRetryMax)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return false
		}
	}
}

// acknowledged records a 201: its latency from the key's first attempt,
// the key for the exactly-once sample, and whether it was a replay.
func (l *crashLoad) acknowledged(w int, i uint64, attempt int, replayed bool, t0 time.Time) {
	if replayed {
		if attempt == 0 {
			l.firstReplays.Add(1) // a new key's first answer should not be a replay
		} else {
			l.retryReplays.Add(1) // committed before the kill, answered after it
		}
	}
	if attempt > 0 {
		l.retryAcked.Add(1)
	}
	l.hists[w].RecordValue(int64(time.Since(t0)))
	l.ackMu.Lock()
	l.acked = append(l.acked, ackRef{int32(w), i, time.Now().UnixNano()})
	l.ackMu.Unlock()
}

// countNetError counts a failed connection by what the kill did to it.
func (l *crashLoad) countNetError(err error) {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		l.refused.Add(1)
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		l.reset.Add(1)
	default:
		l.netOther.Add(1)
	}
}

// countRetryStatus counts an answer that asks for the same key again.
func (l *crashLoad) countRetryStatus(status int) {
	switch status {
	case http.StatusServiceUnavailable:
		l.s503.Add(1)
	case http.StatusConflict:
		l.s409.Add(1)
	case http.StatusTooManyRequests:
		l.s429.Add(1)
	default:
		l.s500.Add(1)
	}
}

// result is the keyed-load line: acknowledged requests over the whole run
// (downtime included) and what the other attempts got.
func (l *crashLoad) result(seconds float64, portChanges int, logs *crashLogs) *Result {
	h := newHist()
	for _, x := range l.hists {
		h.Merge(x)
	}
	m := Measured{Calls: uint64(l.ackedCount()), Items: uint64(l.ackedCount()), Seconds: seconds, Hist: h}
	r := m.Result("keyed-load", l.clients)
	r.NoFloorRatio = true
	r.Set("acked", l.ackedCount())
	r.Set("latency", "first attempt to 201, retries and downtime included")
	r.Set("attempts", l.attempts.Load())
	r.Set("retries", l.retries.Load())
	r.Set("acked_after_retry", l.retryAcked.Load())
	r.Set("replayed_on_retry", l.retryReplays.Load())
	r.Set("replayed_on_first_attempt", l.firstReplays.Load())
	r.Set("conn_refused", l.refused.Load())
	r.Set("conn_reset", l.reset.Load())
	r.Set("conn_other", l.netOther.Load())
	r.Set("status_503", l.s503.Load())
	r.Set("status_409", l.s409.Load())
	r.Set("status_429", l.s429.Load())
	r.Set("status_500", l.s500.Load())
	r.Set("final_new_key", l.newKey.Load())
	r.Set("abandoned_at_stop", l.abandoned.Load())
	if portChanges > 0 {
		r.Set("port_changes", portChanges)
	}
	if s := logs.summary(); s != "" {
		r.Set("idemd_warnings", s)
	}
	return &r
}

// verifyExactlyOnce re-posts a sample of acknowledged keys with the same
// body: each must replay its stored 201 (Idempotent-Replayed: true), and
// the batch's first and last documents must be there.
func verifyExactlyOnce(ctx context.Context, l *crashLoad, base string, marks []int, seed uint64, retention time.Duration) (*Result, error) {
	l.ackMu.Lock()
	acked := slices.Clone(l.acked)
	l.ackMu.Unlock()
	if retention > 0 {
		// A key whose receipt retention ended is a new request again: only
		// keys acknowledged within the last half of the retention replay.
		since := time.Now().Add(-retention / 2).UnixNano()
		from, _ := slices.BinarySearchFunc(acked, since, func(a ackRef, t int64) int { return cmp.Compare(a.at, t) })
		acked = acked[from:]
		var kept []int
		for _, m := range marks {
			if m-from > 0 {
				kept = append(kept, m-from)
			}
		}
		marks = kept
	}
	pick, beforeKill := crashSample(len(acked), marks, crashSampleKeys, rand.New(rand.NewPCG(seed, 0x73616d70))) // "samp"
	c := l.client
	var bad []string
	replayed, docs := 0, 0
	t0 := time.Now()
	for _, j := range pick {
		a := acked[j]
		w, i := int(a.w), a.i
		key := l.wl.key(w, i)
		ans, err := l.post(ctx, base, key, l.wl.appendBody(nil, w, i))
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s: %v", key, err))
			continue
		case ans.status != http.StatusCreated || !ans.replayed:
			bad = append(bad, fmt.Sprintf("%s: status %d replayed=%v code %q", key, ans.status, ans.replayed, ans.code))
			continue
		}
		replayed++
		ok := true
		for _, d := range []int{0, l.wl.docs - 1} {
			id := string(l.wl.appendDocID(nil, w, i, d))
			st, err := getStatus(ctx, c, base+"/v1/tables/"+crashTable+"/docs/"+id)
			if err != nil || st != http.StatusOK {
				bad = append(bad, fmt.Sprintf("%s: document %s: status %d %v", key, id, st, err))
				ok = false
			}
		}
		if ok {
			docs++
		}
	}
	r := &Result{Case: "exactly-once", Concurrency: l.clients, Ops: uint64(len(pick)), Seconds: time.Since(t0).Seconds(),
		NoFloorRatio: true}
	r.Set("sampled", len(pick))
	r.Set("sampled_last_before_kill", beforeKill)
	r.Set("replayed_201", replayed)
	r.Set("documents_present", docs)
	r.Set("mismatches", len(bad))
	if len(pick) == 0 {
		return r, errors.New("exactly-once: no acknowledged key to sample")
	}
	if len(bad) > 0 {
		return r, fmt.Errorf("exactly-once: %d of %d sampled acknowledged keys did not replay their 201 with their documents: %s",
			len(bad), len(pick), strings.Join(bad[:min(len(bad), 5)], "; "))
	}
	return r, nil
}

// crashSample picks up to want distinct indexes of n acknowledged keys:
// the last one acknowledged before each kill (at most want/2; beforeKill
// says how many), then random ones.
func crashSample(n int, marks []int, want int, rng *rand.Rand) (out []int, beforeKill int) {
	want = min(want, n)
	seen := map[int]bool{}
	add := func(j int) {
		if j >= 0 && j < n && !seen[j] {
			seen[j] = true
			out = append(out, j)
		}
	}
	for _, m := range marks {
		if len(out) >= want/2 {
			break
		}
		add(m - 1)
	}
	beforeKill = len(out)
	for len(out) < want {
		add(rng.IntN(n))
	}
	return out, beforeKill
}

func getStatus(ctx context.Context, c *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}
