package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func init() {
	register(Suite{
		Name:     "peer",
		Rank:     90,
		RunsLast: true,
		Doc:      "PostgreSQL (-pg DSN): Stripe/brandur-style idempotency keys with the same batches, as a library and behind net/http (pg-http-*, the http suite's route and client), and pg-keyed-hot (each also UPDATE … SET n = n + 1 on one row; aborts_per_op); Idem's ratios against it",
		Run:      runPeer,
	})
}

// The peer is the design a team would otherwise build (brandur.org's
// "Implementing Stripe-like Idempotency Keys in Postgres"): a key row
// published as pending in its own transaction, then the documents and the
// final response in a second one; replays SELECT the stored response. The
// batch shape is the same as Idem's, and durability is PostgreSQL's default
// (synchronous_commit=on).
const (
	peerKeysTable = "idem_bench_keys"
	peerDocsTable = "idem_bench_docs"
	// peerHotTable holds pg-keyed-hot's one shared row.
	peerHotTable = "idem_bench_hot"

	peerResponse = `{"inserted":%d,"deleted":0,"transformed":0}`
)

// docs/design.md §12 ratios of Idem against the peer, judged when both ran.
const (
	targetKeyedP50VsPipe  = 0.8 // Idem keyed p50@1 <= 0.8 x pg-keyed-pipe p50@1
	targetKeyedVsPeerBest = 5.0 // Idem keyed@64 >= 5 x the peer's best keyed rate
	// issue 18's nearer aim for the same ratio
	targetKeyedVsPeerBestIssue18 = 3.0
	targetHTTPVsPeerBest         = 2.5 // HTTP keyed@32 >= 2.5 x the peer's best keyed rate
	targetHTTPReplayVsPG         = 1.0 // HTTP replay@32 >= 1 x the peer's SELECT replay
)

var peerSQL = struct {
	schema, insertKey, insertDocs, finishKey, replay, incHot string
}{
	schema: `DROP TABLE IF EXISTS ` + peerKeysTable + `, ` + peerDocsTable + `, ` + peerHotTable + `;
CREATE TABLE ` + peerKeysTable + ` (
	principal       text        NOT NULL,
	idem_key        text        NOT NULL,
	fingerprint     bytea       NOT NULL,
	request         text,
	state           text        NOT NULL,
	response_status int,
	response_body   text,
	created_at      timestamptz NOT NULL DEFAULT now(),
	completed_at    timestamptz,
	PRIMARY KEY (principal, idem_key));
CREATE TABLE ` + peerDocsTable + ` (id text PRIMARY KEY, doc jsonb NOT NULL);
CREATE TABLE ` + peerHotTable + ` (id text PRIMARY KEY, n bigint NOT NULL);
INSERT INTO ` + peerHotTable + ` (id, n) VALUES ('` + hotDocID + `', 0);`,
	// Lookup and create in one statement: a conflict means the key exists.
	insertKey: `INSERT INTO ` + peerKeysTable + ` (principal, idem_key, fingerprint, request, state)
VALUES ($1, $2, $3, $4, 'pending') ON CONFLICT DO NOTHING RETURNING state`,
	insertDocs: `INSERT INTO ` + peerDocsTable + ` (id, doc)
SELECT u.id, u.doc::jsonb FROM unnest($1::text[], $2::text[]) AS u(id, doc)
ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc`,
	finishKey: `UPDATE ` + peerKeysTable + ` SET state = 'finished', request = NULL, response_status = 201,
response_body = $3, completed_at = now() WHERE principal = $1 AND idem_key = $2`,
	replay: `SELECT fingerprint, state, response_status, response_body FROM ` + peerKeysTable + `
WHERE principal = $1 AND idem_key = $2`,
	incHot: `UPDATE ` + peerHotTable + ` SET n = n + 1 WHERE id = '` + hotDocID + `'`,
}

// peerRequest is one call's request as the peer sees it.
type peerRequest struct {
	key   string
	body  []byte
	fp    [32]byte
	ids   []string
	docs  []string
	reply string
}

func (wl *workload) peerRequest(w int, i uint64) peerRequest {
	r := peerRequest{key: wl.key(w, i), body: wl.appendBody(nil, w, i),
		ids: make([]string, wl.docs), docs: make([]string, wl.docs), reply: fmt.Sprintf(peerResponse, wl.docs)}
	r.fp = sha256.Sum256(r.body)
	var buf []byte
	for j := range wl.docs {
		buf = wl.appendDocID(buf[:0], w, i, j)
		r.ids[j], r.docs[j] = string(buf), string(wl.doc)
	}
	return r
}

func runPeer(env *Env) error {
	if env.Opts.PG == "" {
		env.Skip("pass -pg postgres://... to compare with PostgreSQL (cmd/bench/pg-throwaway.sh starts a throwaway one)")
		return nil
	}
	ctx := env.Ctx
	concs := env.Opts.Concurrency
	maxC := 1
	for _, c := range concs {
		maxC = max(maxC, c)
	}
	cfg, err := pgxpool.ParseConfig(env.Opts.PG)
	if err != nil {
		return fmt.Errorf("-pg: %w", err)
	}
	cfg.MaxConns = int32(max(maxC, 16))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("-pg: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, peerSQL.schema); err != nil {
		return fmt.Errorf("peer schema: %w", err)
	}
	defer pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+peerKeysTable+`, `+peerDocsTable+`, `+peerHotTable)
	var version, syncCommit, fsync string
	_ = pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('synchronous_commit'), current_setting('fsync')`).
		Scan(&version, &syncCommit, &fsync)

	var results []*Result
	fail := func(err error) error {
		env.reportAll(results)
		return err
	}
	for _, name := range []string{"pg-keyed", "pg-keyed-pipe", "pg-nokey"} {
		for _, c := range concs {
			r, err := peerCase(env, pool, name, c, newWorkload(env.Opts.BatchDocs), nil)
			if err != nil {
				return fail(err)
			}
			results = append(results, &r)
		}
	}
	hot, err := peerKeyedHotCases(env, pool, concs)
	results = append(results, hot...)
	if err != nil {
		return fail(err)
	}
	// Replays of keys finished by the pipelined flow.
	wl := newWorkload(env.Opts.BatchDocs)
	n := env.Opts.ReplayKeys
	reqs := make([]peerRequest, n)
	for k := range reqs {
		reqs[k] = wl.peerRequest(0, uint64(k))
	}
	env.Progress("%s/pg-replay creating %d keys", env.Suite(), n)
	err = precreate(ctx, n, func(ctx context.Context, k uint64) error { return peerKeyedPipe(ctx, pool, &reqs[k]) })
	env.ProgressDone()
	if err != nil {
		return fail(err)
	}
	for _, c := range concs {
		r, err := peerCase(env, pool, "pg-replay", c, wl, reqs)
		if err != nil {
			return fail(err)
		}
		results = append(results, &r)
	}
	hs, err := peerHTTPCases(env, pool)
	results = append(results, hs...)
	if err != nil {
		return fail(err)
	}
	for _, r := range results {
		r.Set("fsync_waits_p50", round(env.fsyncWaits(r.P50us), 2))
		r.Set("pg_version", version)
		r.Set("pg_synchronous_commit", syncCommit)
		r.Set("pg_fsync", fsync)
	}
	env.comparePeer(results)
	env.comparePGHTTP(results)
	env.reportAll(results)
	return nil
}

// peerCase runs one flow closed-loop. Fsyncs are not counted (they happen
// in another process); the rates compare with the floors all the same.
func peerCase(env *Env, pool *pgxpool.Pool, name string, concurrency int, wl *workload, replay []peerRequest) (Result, error) {
	// PostgreSQL's quiesce: write back what the previous case dirtied, so
	// its checkpoint does not land inside this one (needs superuser; a
	// refusal only costs that fairness).
	_, _ = pool.Exec(env.Ctx, "CHECKPOINT")
	// Open every connection the case will use before it starts: backend
	// start-up is not part of the flow.
	if err := warmPool(env.Ctx, pool, concurrency); err != nil {
		return Result{}, err
	}
	m, err := env.Loop(Loop{Case: name, Concurrency: concurrency, ServerOutside: true},
		func(ctx context.Context, w int, i uint64) error {
			switch name {
			case "pg-replay":
				return peerReplay(ctx, pool, &replay[replayIndex(w, i, len(replay))])
			case "pg-nokey":
				r := wl.peerRequest(w, i)
				_, err := pool.Exec(ctx, peerSQL.insertDocs, r.ids, r.docs)
				return err
			case "pg-keyed-pipe":
				r := wl.peerRequest(w, i)
				return peerKeyedPipe(ctx, pool, &r)
			}
			r := wl.peerRequest(w, i)
			return peerKeyed(ctx, pool, &r)
		})
	if err != nil {
		return Result{}, err
	}
	r := m.Result(name, concurrency)
	if replay != nil {
		r.Set("replay_set", len(replay))
	}
	return r, nil
}

// warmPool holds n connections at once, so the pool has opened them.
func warmPool(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	return nil
}

var errPeerKeyExists = errors.New("peer: idempotency key already exists")

// peerKeyed is the flow as usually written: two explicit transactions, one
// statement at a time (BEGIN, INSERT key, COMMIT; BEGIN, INSERT docs,
// UPDATE key, COMMIT — seven round trips, two commits).
func peerKeyed(ctx context.Context, pool *pgxpool.Pool, r *peerRequest) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	var state string
	err = tx.QueryRow(ctx, peerSQL.insertKey, benchPrincipal, r.key, r.fp[:], r.body).Scan(&state)
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		tx.Rollback(ctx)
		if errors.Is(err, pgx.ErrNoRows) {
			return errPeerKeyExists
		}
		return err
	}
	tx, err = pool.Begin(ctx)
	if err != nil {
		return err
	}
	if _, err = tx.Exec(ctx, peerSQL.insertDocs, r.ids, r.docs); err == nil {
		_, err = tx.Exec(ctx, peerSQL.finishKey, benchPrincipal, r.key, r.reply)
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		tx.Rollback(ctx)
	}
	return err
}

// peerKeyedPipe is the same flow with the fewest round trips: the pending
// key as one auto-committed statement, then the documents and the response
// as one pipelined batch (pgx runs a batch as one implicit transaction):
// two round trips, two commits.
func peerKeyedPipe(ctx context.Context, pool *pgxpool.Pool, r *peerRequest) error {
	var state string
	err := pool.QueryRow(ctx, peerSQL.insertKey, benchPrincipal, r.key, r.fp[:], r.body).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return errPeerKeyExists
	}
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(peerSQL.insertDocs, r.ids, r.docs)
	b.Queue(peerSQL.finishKey, benchPrincipal, r.key, r.reply)
	return pool.SendBatch(ctx, b).Close()
}

// peerReplay reads the stored response and compares the fingerprint, as
// Idem's replay does.
func peerReplay(ctx context.Context, pool *pgxpool.Pool, r *peerRequest) error {
	var (
		fp     []byte
		state  string
		status *int
		body   *string
	)
	if err := pool.QueryRow(ctx, peerSQL.replay, benchPrincipal, r.key).Scan(&fp, &state, &status, &body); err != nil {
		return err
	}
	if string(fp) != string(r.fp[:]) || state != "finished" || status == nil || *status != 201 || body == nil {
		return fmt.Errorf("peer replay of %s: state %q", r.key, state)
	}
	return nil
}

// comparePeer puts Idem's docs/design.md §12 ratios against this run's peer on the
// peer lines they are judged by.
func (e *Env) comparePeer(peer []*Result) {
	p := indexResults(peer)
	bestKeyed := p.best("pg-keyed")
	if b := p.best("pg-keyed-pipe"); bestKeyed == nil || (b != nil && b.OpsPerSec > bestKeyed.OpsPerSec) {
		bestKeyed = b
	}
	pipe1 := p.get("pg-keyed-pipe", 1)
	replayBest := p.best("pg-replay")
	lib := indexResults(ptrs(e.Earlier("receipts")))
	web := indexResults(ptrs(e.Earlier("http")))
	compared := false
	if r := lib.get("keyed", 1); r != nil && pipe1 != nil && pipe1.P50us > 0 {
		x := r.P50us / pipe1.P50us
		pipe1.Set("idem_keyed_p50_over_this", round(x, 3))
		pipe1.Targets = append(pipe1.Targets, Target{
			Want:  fmt.Sprintf("idem keyed p50@1 <= %.1f x pg-keyed-pipe p50@1", targetKeyedP50VsPipe),
			Got:   fmt.Sprintf("%.3fx (%.0f / %.0f µs)", x, r.P50us, pipe1.P50us),
			Met:   x <= targetKeyedP50VsPipe,
			Score: atMost(x, targetKeyedP50VsPipe),
		})
		compared = true
	}
	if bestKeyed != nil && bestKeyed.OpsPerSec > 0 {
		if r := lib.get("keyed", 64); r != nil {
			x := r.OpsPerSec / bestKeyed.OpsPerSec
			bestKeyed.Set("idem_keyed64_over_this", round(x, 3))
			bestKeyed.Targets = append(bestKeyed.Targets, Target{
				Want:  fmt.Sprintf("idem keyed@64 >= %.1f x the peer's best keyed (%s@%d)", targetKeyedVsPeerBest, bestKeyed.Case, bestKeyed.Concurrency),
				Got:   fmt.Sprintf("%.2fx (%.0f / %.0f req/s)", x, r.OpsPerSec, bestKeyed.OpsPerSec),
				Met:   x >= targetKeyedVsPeerBest,
				Score: atLeast(x, targetKeyedVsPeerBest),
			}, Target{
				Want:  fmt.Sprintf("idem keyed@64 >= %.1f x the peer's best keyed (%s@%d, issue 18)", targetKeyedVsPeerBestIssue18, bestKeyed.Case, bestKeyed.Concurrency),
				Got:   fmt.Sprintf("%.2fx (%.0f / %.0f req/s)", x, r.OpsPerSec, bestKeyed.OpsPerSec),
				Met:   x >= targetKeyedVsPeerBestIssue18,
				Score: atLeast(x, targetKeyedVsPeerBestIssue18),
			})
			compared = true
		}
		if r := web.get("keyed", httpTargetConc); r != nil {
			x := r.OpsPerSec / bestKeyed.OpsPerSec
			bestKeyed.Set("idem_http_keyed32_over_this", round(x, 3))
			bestKeyed.Targets = append(bestKeyed.Targets, Target{
				Want:  fmt.Sprintf("idem http keyed@%d >= %.1f x the peer's best keyed (%s@%d)", httpTargetConc, targetHTTPVsPeerBest, bestKeyed.Case, bestKeyed.Concurrency),
				Got:   fmt.Sprintf("%.2fx (%.0f / %.0f req/s)", x, r.OpsPerSec, bestKeyed.OpsPerSec),
				Met:   x >= targetHTTPVsPeerBest,
				Score: atLeast(x, targetHTTPVsPeerBest),
			})
			compared = true
		}
	}
	if r := web.get("replay", httpTargetConc); r != nil && replayBest != nil && replayBest.OpsPerSec > 0 {
		x := r.OpsPerSec / replayBest.OpsPerSec
		replayBest.Set("idem_http_replay32_over_this", round(x, 3))
		replayBest.Targets = append(replayBest.Targets, Target{
			Want:  fmt.Sprintf("idem http replay@%d >= %.1f x the peer's SELECT replay (best, pg-replay@%d)", httpTargetConc, targetHTTPReplayVsPG, replayBest.Concurrency),
			Got:   fmt.Sprintf("%.2fx (%.0f / %.0f req/s)", x, r.OpsPerSec, replayBest.OpsPerSec),
			Met:   x >= targetHTTPReplayVsPG,
			Score: atLeast(x, targetHTTPReplayVsPG),
		})
		compared = true
	}
	// The ratio of every Idem keyed/replay/fast line to its peer twin.
	if keyedHotOverPeer(lib, p) {
		compared = true
	}
	twins := map[string]string{"keyed": "pg-keyed-pipe", "replay": "pg-replay", "fast": "pg-nokey", caseKeyedHot: casePGKeyedHot}
	for _, side := range []struct {
		label string
		res   byCase
	}{{"lib", lib}, {"http", web}} {
		for name, peerName := range twins {
			for c, r := range side.res[name] {
				if pr := p.get(peerName, c); pr != nil && pr.OpsPerSec > 0 {
					pr.Set("idem_"+side.label+"_"+name+"_rate_over_this", round(r.OpsPerSec/pr.OpsPerSec, 3))
				}
			}
		}
	}
	if !compared {
		for _, r := range peer {
			r.Set("note", "run with -suite receipts,http,peer for Idem's ratios against this peer")
			break
		}
	}
}

func ptrs(rs []Result) []*Result {
	out := make([]*Result, len(rs))
	for i := range rs {
		out[i] = &rs[i]
	}
	return out
}
