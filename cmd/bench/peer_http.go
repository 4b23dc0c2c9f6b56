package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The like-for-like HTTP peer (issue 18): the brandur flow of the peer
// suite (pipelined: the pending key as one statement, documents and
// response as one batch) behind a net/http server with idemd's batch
// route, JSON bodies and Idempotency-Key handling — what a team would
// otherwise write and run — measured with the http suite's client.
const (
	casePGHTTPKeyed  = "pg-http-keyed"
	casePGHTTPReplay = "pg-http-replay"
	casePGHTTPNoKey  = "pg-http-nokey"
	// pgHTTPBodyBytesMax is idemd's default -max-body.
	pgHTTPBodyBytesMax = 1 << 20
)

// docs/design.md §12 / issue 18 ratios of Idem's HTTP cases against this peer.
const (
	targetHTTPKeyedVsPGHTTP  = 2.0 // http keyed@32 >= 2 x pg-http-keyed@32
	targetHTTPReplayVsPGHTTP = 1.5 // http replay@32 >= 1.5 x pg-http-replay@32
)

// pgHTTP serves POST /v1/tables/{table}/batch on PostgreSQL.
type pgHTTP struct{ pool *pgxpool.Pool }

type pgHTTPBatch struct {
	Inserts []struct {
		ID  string          `json:"id"`
		Doc json.RawMessage `json:"doc"`
	} `json:"inserts"`
}

func pgProblem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"urn:peer:problem:%s","status":%d,"code":%q,"detail":%q}`, code, status, code, detail)
}

func (p *pgHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, pgHTTPBodyBytesMax))
	if err != nil {
		pgProblem(w, http.StatusRequestEntityTooLarge, "payload_too_large", err.Error())
		return
	}
	var b pgHTTPBatch
	if err := json.Unmarshal(body, &b); err != nil || len(b.Inserts) == 0 {
		pgProblem(w, http.StatusBadRequest, "invalid_request", "body must be a batch of inserts")
		return
	}
	ids, docs := make([]string, len(b.Inserts)), make([]string, len(b.Inserts))
	for i, in := range b.Inserts {
		ids[i], docs[i] = in.ID, string(in.Doc)
	}
	reply := fmt.Sprintf(peerResponse, len(ids))
	ctx := r.Context()
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		if _, err := p.pool.Exec(ctx, peerSQL.insertDocs, ids, docs); err != nil {
			pgProblem(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		pgReply(w, http.StatusCreated, reply, false)
		return
	}
	w.Header().Set("Idempotency-Key", key)
	fp := sha256.Sum256(body)
	var state string
	err = p.pool.QueryRow(ctx, peerSQL.insertKey, benchPrincipal, key, fp[:], string(body)).Scan(&state)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		p.replay(ctx, w, key, fp)
		return
	case err != nil:
		pgProblem(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	batch := &pgx.Batch{}
	batch.Queue(peerSQL.insertDocs, ids, docs)
	batch.Queue(peerSQL.finishKey, benchPrincipal, key, reply)
	if err := p.pool.SendBatch(ctx, batch).Close(); err != nil {
		pgProblem(w, http.StatusServiceUnavailable, "pending", err.Error())
		return
	}
	pgReply(w, http.StatusCreated, reply, false)
}

// replay answers a key that exists: its stored response, a mismatch, or
// in progress.
func (p *pgHTTP) replay(ctx context.Context, w http.ResponseWriter, key string, fp [32]byte) {
	var (
		got    []byte
		state  string
		status *int
		body   *string
	)
	if err := p.pool.QueryRow(ctx, peerSQL.replay, benchPrincipal, key).Scan(&got, &state, &status, &body); err != nil {
		pgProblem(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	switch {
	case string(got) != string(fp[:]):
		pgProblem(w, http.StatusUnprocessableEntity, "idempotency_key_mismatch", "the key was used with another request")
	case state != "finished" || status == nil || body == nil:
		pgProblem(w, http.StatusConflict, "idempotency_request_in_progress", "retry later")
	default:
		pgReply(w, *status, *body, true)
	}
}

func pgReply(w http.ResponseWriter, status int, body string, replayed bool) {
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// servePGHTTP starts the peer's server and a client like the http suite's.
func servePGHTTP(pool *pgxpool.Pool, clientKind string, maxConc int) (*httpServer, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: &pgHTTP{pool: pool}, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	client, err := newLoadClient(clientKind, ln.Addr().String(), maxConc)
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	base := "http://" + ln.Addr().String()
	s := &httpServer{base: base, url: base + "/v1/tables/" + benchTable + "/batch", srv: srv, client: client}
	stop := func() {
		client.closeIdle()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	return s, stop, nil
}

// peerHTTPCases runs the three pg-http cases at the http suite's
// concurrencies.
func peerHTTPCases(env *Env, pool *pgxpool.Pool, prof peerProfile) ([]*Result, error) {
	concs := env.concurrencies(httpDefaultConcurrency)
	maxC := 1
	for _, c := range concs {
		maxC = max(maxC, c)
	}
	srv, stop, err := servePGHTTP(pool, env.Opts.HTTPClient, maxC)
	if err != nil {
		return nil, err
	}
	defer stop()
	pc := &pgHTTPCases{env: env, pool: pool, prof: prof, srv: srv}
	for _, name := range []string{casePGHTTPKeyed, casePGHTTPNoKey} {
		if !env.Want(name) {
			continue
		}
		for _, c := range concs {
			if err := pc.writes(name, c); err != nil {
				return pc.out, err
			}
		}
	}
	if !env.Want(casePGHTTPReplay) {
		return pc.out, nil
	}
	err = pc.replays(concs)
	return pc.out, err
}

// pgHTTPCases runs the pg-http-* cases of one profile against one server.
type pgHTTPCases struct {
	env  *Env
	pool *pgxpool.Pool
	prof peerProfile
	srv  *httpServer
	out  []*Result
}

// run measures one case at concurrency c, on a checkpointed server and a
// warm pool.
func (pc *pgHTTPCases) run(name string, c int, op Op) error {
	_, _ = pc.pool.Exec(pc.env.Ctx, "CHECKPOINT")
	if err := warmPool(pc.env.Ctx, pc.pool, c); err != nil {
		return err
	}
	m, err := pc.env.Loop(Loop{Case: pc.prof.caseName(name), Concurrency: c, ServerOutside: true}, op)
	if err != nil {
		return err
	}
	r := m.Result(pc.prof.caseName(name), c)
	pc.out = append(pc.out, &r)
	return nil
}

// writes measures new batches, keyed (a new key each) or not.
func (pc *pgHTTPCases) writes(name string, c int) error {
	wl := newWorkload(pc.env.Opts.BatchDocs)
	bufs := make([][]byte, c)
	keyed := name == casePGHTTPKeyed
	return pc.run(name, c, func(ctx context.Context, w int, i uint64) error {
		bufs[w] = wl.appendBody(bufs[w][:0], w, i)
		key := ""
		if keyed {
			key = wl.key(w, i)
		}
		return pc.srv.post(ctx, bufs[w], key, false)
	})
}

// replays creates -replay-keys keyed batches, then measures their
// replays at every concurrency.
func (pc *pgHTTPCases) replays(concs []int) error {
	env := pc.env
	wl := newWorkload(env.Opts.BatchDocs)
	n := env.Opts.ReplayKeys
	bodies, keys := make([][]byte, n), make([]string, n)
	for k := range n {
		bodies[k], keys[k] = wl.appendBody(nil, 0, uint64(k)), wl.key(0, uint64(k))
	}
	env.Progress("%s/%s creating %d keys", env.Suite(), pc.prof.caseName(casePGHTTPReplay), n)
	err := precreate(env.Ctx, n, func(ctx context.Context, k uint64) error { return pc.srv.post(ctx, bodies[k], keys[k], false) })
	env.ProgressDone()
	if err != nil {
		return err
	}
	for _, c := range concs {
		if err := pc.run(casePGHTTPReplay, c, func(ctx context.Context, w int, i uint64) error {
			k := replayIndex(w, i, n)
			return pc.srv.post(ctx, bodies[k], keys[k], true)
		}); err != nil {
			return err
		}
		pc.out[len(pc.out)-1].Set("replay_set", n)
	}
	return nil
}

// comparePGHTTP puts Idem's HTTP rates over one profile's pg-http rows on
// them, when the http suite ran earlier in this run; the targets go on the
// faster profile's rows (judgePeer).
func (e *Env) comparePGHTTP(peer []*Result, prof peerProfile) {
	p := indexResults(peer)
	web := indexResults(ptrs(e.Earlier("http")))
	for idem, peerCase := range map[string]string{"keyed": casePGHTTPKeyed, "replay": casePGHTTPReplay, "fast": casePGHTTPNoKey} {
		for c, r := range web[idem] {
			if pr := p.get(prof.caseName(peerCase), c); pr != nil && pr.OpsPerSec > 0 {
				pr.Set("idem_http_"+idem+"_rate_over_this", round(r.OpsPerSec/pr.OpsPerSec, 3))
			}
		}
	}
}
