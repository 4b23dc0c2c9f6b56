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
		Cases:    peerCases,
		Doc:      "PostgreSQL (-pg DSN on defaults, -pg-tuned DSN tuned: rows pg-tuned-*): Stripe/brandur-style idempotency keys with the same batches, as a library and behind net/http (pg-http-*, the http suite's route and client), and pg-keyed-hot (each also UPDATE … SET n = n + 1 on one row; aborts_per_op); Idem's ratios against it",
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
	profiles := peerProfiles(env.Opts)
	if len(profiles) == 0 {
		env.Skip("pass -pg postgres://... (and -pg-tuned postgres://...) to compare with PostgreSQL (cmd/bench/pg-throwaway.sh starts throwaway ones)")
		return nil
	}
	var all []*Result
	for _, prof := range profiles {
		results, err := runPeerProfile(env, prof)
		all = append(all, results...)
		if err != nil {
			env.reportAll(all)
			return fmt.Errorf("%s peer: %w", prof.label, err)
		}
		env.compareProfile(results, prof)
	}
	env.judgePeer(all, profiles)
	env.reportAll(all)
	return nil
}

// compareProfile puts Idem's rates over each of one profile's rows on it;
// the targets go on the peer's best rows over every profile (judgePeer).
func (e *Env) compareProfile(results []*Result, prof peerProfile) {
	e.peerTwinRatios(results, prof)
	e.comparePGHTTP(results, prof)
}

// peerCases are the peer's cases as -case names them (as on the default
// profile); a name selects the case on both profiles.
var peerCases = []string{"pg-keyed", "pg-keyed-pipe", "pg-nokey", casePGKeyedHot, "pg-replay",
	casePGHTTPKeyed, casePGHTTPNoKey, casePGHTTPReplay}

// runPeerProfile measures every wanted case on one server and stamps each
// row with the server's settings.
func runPeerProfile(env *Env, prof peerProfile) ([]*Result, error) {
	ctx := env.Ctx
	maxC := 1
	for _, c := range env.Opts.Concurrency {
		maxC = max(maxC, c)
	}
	cfg, err := pgxpool.ParseConfig(prof.dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = peerPoolSize(prof.dsn, cfg, maxC)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	settings, err := readPGSettings(ctx, pool)
	if err != nil {
		return nil, err
	}
	if err := settings.check(); err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, peerSQL.schema); err != nil {
		return nil, fmt.Errorf("peer schema: %w", err)
	}
	defer pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+peerKeysTable+`, `+peerDocsTable+`, `+peerHotTable)
	results, err := peerProfileCases(env, pool, prof)
	// What the cases left in the tables, so shared_buffers can be judged
	// against it (pg-throwaway.sh sizes the tuned one to hold it all).
	var tableBytes int64
	_ = pool.QueryRow(ctx, `SELECT pg_total_relation_size('`+peerKeysTable+`') + pg_total_relation_size('`+peerDocsTable+`')`).Scan(&tableBytes)
	for _, r := range results {
		r.Set("fsync_waits_p50", round(env.fsyncWaits(r.P50us), 2))
		r.Set("pg_table_bytes", tableBytes)
		settings.set(r, prof)
	}
	return results, err
}

// peerProfileCases runs the wanted cases in order: the library flows, the
// hot row, replays, then the flows behind net/http.
func peerProfileCases(env *Env, pool *pgxpool.Pool, prof peerProfile) ([]*Result, error) {
	concs := env.Opts.Concurrency
	var results []*Result
	for _, name := range []string{"pg-keyed", "pg-keyed-pipe", "pg-nokey"} {
		if !env.Want(name) {
			continue
		}
		for _, c := range concs {
			r, err := peerCase(env, pool, prof, name, c, newWorkload(env.Opts.BatchDocs), nil)
			if err != nil {
				return results, err
			}
			results = append(results, &r)
		}
	}
	if env.Want(casePGKeyedHot) {
		hot, err := peerKeyedHotCases(env, pool, prof, concs)
		results = append(results, hot...)
		if err != nil {
			return results, err
		}
	}
	if env.Want("pg-replay") {
		rs, err := peerReplayCases(env, pool, prof)
		results = append(results, rs...)
		if err != nil {
			return results, err
		}
	}
	if !env.Want(casePGHTTPKeyed) && !env.Want(casePGHTTPNoKey) && !env.Want(casePGHTTPReplay) {
		return results, nil
	}
	hs, err := peerHTTPCases(env, pool, prof)
	return append(results, hs...), err
}

// peerReplayCases replays keys finished by the pipelined flow.
func peerReplayCases(env *Env, pool *pgxpool.Pool, prof peerProfile) ([]*Result, error) {
	wl := newWorkload(env.Opts.BatchDocs)
	n := env.Opts.ReplayKeys
	reqs := make([]peerRequest, n)
	for k := range reqs {
		reqs[k] = wl.peerRequest(0, uint64(k))
	}
	env.Progress("%s/%s creating %d keys", env.Suite(), prof.caseName("pg-replay"), n)
	err := precreate(env.Ctx, n, func(ctx context.Context, k uint64) error { return peerKeyedPipe(ctx, pool, &reqs[k]) })
	env.ProgressDone()
	if err != nil {
		return nil, err
	}
	var results []*Result
	for _, c := range env.Opts.Concurrency {
		r, err := peerCase(env, pool, prof, "pg-replay", c, wl, reqs)
		if err != nil {
			return results, err
		}
		results = append(results, &r)
	}
	return results, nil
}

// peerCase runs one flow closed-loop. Fsyncs are not counted (they happen
// in another process); the rates compare with the floors all the same.
func peerCase(env *Env, pool *pgxpool.Pool, prof peerProfile, name string, concurrency int, wl *workload, replay []peerRequest) (Result, error) {
	// PostgreSQL's quiesce: write back what the previous case dirtied, so
	// its checkpoint does not land inside this one (needs superuser; a
	// refusal only costs that fairness).
	_, _ = pool.Exec(env.Ctx, "CHECKPOINT")
	// Open every connection the case will use before it starts: backend
	// start-up is not part of the flow.
	if err := warmPool(env.Ctx, pool, concurrency); err != nil {
		return Result{}, err
	}
	m, err := env.Loop(Loop{Case: prof.caseName(name), Concurrency: concurrency, ServerOutside: true},
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
	r := m.Result(prof.caseName(name), concurrency)
	if replay != nil {
		r.Set("replay_set", len(replay))
	}
	return r, nil
}

// warmPool holds n connections at once (no more than the pool has), so
// the pool has opened them.
func warmPool(ctx context.Context, pool *pgxpool.Pool, n int) error {
	n = min(n, int(pool.Config().MaxConns))
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
	return peerKeyedPipeThen(ctx, pool, r)
}

// peerKeyedPipeThen is peerKeyedPipe with statements queued after the
// response, in its second transaction.
func peerKeyedPipeThen(ctx context.Context, pool *pgxpool.Pool, r *peerRequest, then ...string) error {
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
	for _, sql := range then {
		b.Queue(sql)
	}
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

// peerTwinRatios sets the ratio of every Idem keyed/replay/fast/keyed-hot
// line to its twin in this profile, on the twin: informational, on every
// profile's rows.
func (e *Env) peerTwinRatios(peer []*Result, prof peerProfile) {
	p := indexResults(peer)
	lib := indexResults(ptrs(e.Earlier("receipts")))
	web := indexResults(ptrs(e.Earlier("http")))
	twins := map[string]string{"keyed": "pg-keyed-pipe", "replay": "pg-replay", "fast": "pg-nokey", caseKeyedHot: casePGKeyedHot}
	for _, side := range []struct {
		label string
		res   byCase
	}{{"lib", lib}, {"http", web}} {
		for name, peerName := range twins {
			for c, r := range side.res[name] {
				if pr := p.get(prof.caseName(peerName), c); pr != nil && pr.OpsPerSec > 0 {
					pr.Set("idem_"+side.label+"_"+name+"_rate_over_this", round(r.OpsPerSec/pr.OpsPerSec, 3))
				}
			}
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
