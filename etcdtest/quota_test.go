package etcdtest_test

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/testsupport"
)

// The quota test's sizes: a small backend quota, filled by keyed batches
// that each carry a large value in their request (kept by the receipt,
// freed by cleanup) and overwrite one document (freed by compaction).
const (
	quotaBytes = 8 << 20
	// quotaCompaction is etcd's periodic compaction retention: long
	// enough that the fill's revisions of its one document outgrow the
	// high-water mark before a compaction frees them, however slowly a
	// loaded machine fills (at "1s" a fill below about 85 batches/s
	// never reached it), and short enough that compaction frees them soon
	// after the refusal.
	quotaCompaction = "10s"
	quotaHighWater  = "0.5"
	quotaValue      = 48 << 10
	// quotaFillMax bounds the fill: far more batches than the high-water
	// mark holds, so that a gate that never closes fails the test.
	quotaFillMax = 400
	// quotaRetention is the receipts' retention: longer than the fill
	// takes on a loaded machine (a run at load average 10 took over 30 s,
	// and cleanup then freed receipts as fast as the fill wrote them, so
	// the mark was never reached), short enough that cleanup frees the
	// space within the test if compaction alone does not; the margin
	// keeps the replays checked to receipts surely not cleaned yet.
	quotaRetention       = 90 * time.Second
	quotaRetentionMargin = 3 * time.Second
	// quotaResumeMax bounds the wait for the refused key to commit: past
	// the retention of every receipt of the fill, and the cleaner's pass.
	quotaResumeMax = quotaRetention + 30*time.Second
)

// quotaBody is a keyed batch whose request carries quotaValue bytes.
var quotaBody = `{"transforms":[{"id":"big","ops":[{"op":"$set","path":"s","value":"` +
	strings.Repeat("x", quotaValue) + `"}],"upsert":true}]}`

// gauge reads one unlabelled gauge of n's /metrics.
func gauge(t *testing.T, c *apitest.Client, name string) string {
	t.Helper()
	body := string(c.Do("GET", "/metrics", nil).Body)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in /metrics", name)
	}
	return m[1]
}

// TestIdemd_TheQuotaNeverStopsTheCluster: a node on an etcd with a small
// --quota-backend-bytes, filled by keyed batches, refuses new keys 503
// store_full once the backend is above its high-water mark — before
// etcd's NOSPACE alarm, and never failing otherwise — while every key
// already committed still replays byte for byte and /healthz stays 200.
// etcd's periodic compaction (and, past the receipts' retention, cleanup)
// then frees the space by themselves, with no operator: the same node,
// never restarted, commits the refused key. (At these sizes compaction of
// the fill's history alone usually suffices: the test does not prove
// which of the two did it.)
func TestIdemd_TheQuotaNeverStopsTheCluster(t *testing.T) {
	// Most of it is waiting for etcd's periodic compaction (quotaCompaction)
	// on a cluster of its own: it waits beside others.
	t.Parallel()
	c := startCluster(t, etcdtest.Options{Members: 1, QuotaBackendBytes: quotaBytes,
		AutoCompactionMode: "periodic", AutoCompactionRetention: quotaCompaction})
	cl := apitest.NewClient(t, "http://unused")
	n := startNode(t, cl, c, etcdtest.Prefix(t), "node-a", nil, "-retention", quotaRetention.String(), "-tombstone-retention", "0",
		"-clean-interval", "200ms", "-etcd-space-interval", "50ms", "-etcd-high-water", quotaHighWater)
	cn := cl.WithBase(n.Base())
	cn.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	post := func(key string) *apitest.Response {
		return cn.Do("POST", "/v1/tables/t/batch", quotaBody, "Idempotency-Key", key)
	}

	type commit struct {
		body []byte
		at   time.Time
	}
	first := map[string]commit{}
	refused := ""
	for i := 0; i < quotaFillMax && refused == ""; i++ {
		key := fmt.Sprintf("fill-%d", i)
		switch r := post(key); r.Status {
		case 201:
			first[key] = commit{r.Body, time.Now()}
		case 503:
			p := r.Problem(t, 503)
			if p.Code != "store_full" || !p.Retryable || p.RetryWith != "same_key" || p.Outcome != "not_applied" || r.Header.Get("Retry-After") == "" {
				t.Fatalf("%s after %d commits: %+v %v, want store_full not_applied with Retry-After", key, len(first), p, r.Header)
			}
			refused = key
		default:
			t.Fatalf("%s after %d commits: %d %s", key, len(first), r.Status, r.Body)
		}
	}
	if refused == "" {
		t.Fatalf("%d batches of %d KiB on a %d MiB quota: never store_full", quotaFillMax, quotaValue>>10, quotaBytes>>20)
	}
	t.Logf("store_full after %d commits", len(first))
	if got := gauge(t, cn, "idem_etcd_nospace_alarm"); got != "0" {
		t.Fatalf("etcd's NOSPACE alarm fired (%s): the high-water mark came too late", got)
	}
	cn.Do("GET", "/v1/receipts/t/"+refused, nil).Problem(t, 404)
	cn.Do("GET", "/healthz", nil).JSON(t, 200, nil)
	replayed := 0
	for key, cm := range first {
		if time.Since(cm.at) > quotaRetention-quotaRetentionMargin {
			continue // its receipt may be cleaned by now: retention is short here
		}
		r := post(key)
		if r.Status != 201 || !bytes.Equal(r.Body, cm.body) || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay of %s while full: %d %s", key, r.Status, r.Body)
		}
		replayed++
	}
	if replayed == 0 {
		t.Fatalf("no commit young enough to replay: the fill took longer than the retention")
	}
	t.Logf("%d replays while full", replayed)

	// Compaction drops the fill's old revisions, the cleaner the receipts
	// past their retention: the refused key commits, on the same process.
	testsupport.Poll(t, "the refused key committing once cleanup and compaction freed space", quotaResumeMax, func() bool {
		r := post(refused)
		if r.Status == 503 && r.Problem(t, 503).Code == "store_full" {
			return false
		}
		r.JSON(t, 201, nil)
		return true
	})
	select {
	case <-n.Exited():
		t.Fatal("the node exited")
	default:
	}
	if logs := n.Logs(); strings.Contains(logs, "until idemd restarts") {
		t.Fatalf("the node called the full store a stop:\n%s", logs)
	}
	cli := c.Client(t)
	if alarms, err := cli.AlarmList(context.Background()); err != nil || len(alarms.Alarms) != 0 {
		t.Fatalf("alarms %v %v", alarms, err)
	}
}

// TestIdemd_PastTheNoSpaceAlarmReplaysGoOnAndWritesResumeWithoutARestart:
// with no high-water mark to stop it first (-etcd-high-water 1), keyed
// batches fill the backend until etcd raises its NOSPACE alarm. The node
// answers new keys 503 store_full — never "unavailable until idemd
// restarts", never a 500 — and keeps replaying every committed key. Once
// an operator compacts, defragments and disarms the alarm (docs/cluster.md),
// the same node, never restarted, commits the refused key.
func TestIdemd_PastTheNoSpaceAlarmReplaysGoOnAndWritesResumeWithoutARestart(t *testing.T) {
	c := startCluster(t, etcdtest.Options{Members: 1, QuotaBackendBytes: quotaBytes})
	cl := apitest.NewClient(t, "http://unused")
	n := startNode(t, cl, c, etcdtest.Prefix(t), "node-a", nil, "-etcd-space-interval", "50ms", "-etcd-high-water", "1")
	cn := cl.WithBase(n.Base())
	cn.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	post := func(key string) *apitest.Response {
		return cn.Do("POST", "/v1/tables/t/batch", quotaBody, "Idempotency-Key", key)
	}
	first := map[string][]byte{}
	refused := ""
	for i := 0; i < quotaFillMax && refused == ""; i++ {
		key := fmt.Sprintf("fill-%d", i)
		switch r := post(key); r.Status {
		case 201:
			first[key] = r.Body
		case 503:
			if p := r.Problem(t, 503); p.Code != "store_full" || r.Header.Get("Retry-After") == "" {
				t.Fatalf("%s after %d commits: %+v, want store_full with Retry-After", key, len(first), p)
			}
			refused = key
		default:
			t.Fatalf("%s after %d commits: %d %s", key, len(first), r.Status, r.Body)
		}
	}
	if refused == "" {
		t.Fatalf("%d batches of %d KiB on a %d MiB quota: never store_full", quotaFillMax, quotaValue>>10, quotaBytes>>20)
	}
	ctx := context.Background()
	cli := c.Client(t)
	// The node's watcher may say store_full a check before etcd's alarm
	// fires (in use reaching the quota); then another writer fills the
	// rest, as an alarm "fired anyway" would be.
	const filler = "/other-writer/"
	alarms := alarmRaised(ctx, t, cli, filler)
	t.Logf("NOSPACE after %d commits", len(first))
	if r := post("past-the-alarm"); r.Status != 503 || r.Problem(t, 503).Code != "store_full" {
		t.Fatalf("a new key past the alarm: %d %s, want 503 store_full", r.Status, r.Body)
	}
	for key, body := range first {
		if r := post(key); r.Status != 201 || !bytes.Equal(r.Body, body) {
			t.Fatalf("replay of %s past the alarm: %d %s", key, r.Status, r.Body)
		}
	}
	cn.Do("GET", "/healthz", nil).JSON(t, 200, nil)

	// The operator's part: free space, compact, defragment, disarm.
	if _, err := cli.Delete(ctx, filler, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if err := c.CompactAndDefrag(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range alarms.Alarms {
		if _, err := cli.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.Poll(t, "the refused key committing once the alarm is disarmed", testsupport.Patience, func() bool {
		r := post(refused)
		if r.Status == 503 {
			return false // store_full until the watcher's next check, or pending until maintenance finishes it
		}
		if r.Status == 409 && r.Problem(t, 409).Code == "idempotency_request_in_progress" {
			// Its create and Begin landed before the alarm and its
			// decision did not: started, until maintenance decides it.
			return false
		}
		r.JSON(t, 201, nil)
		return true
	})
	// (The refused key's commit is the resumption; another new key may
	// meet the mark again: the node's own keys fill most of the quota.)
	select {
	case <-n.Exited():
		t.Fatal("the node exited")
	default:
	}
	if logs := n.Logs(); strings.Contains(logs, "until idemd restarts") {
		t.Fatalf("the node called the alarm a stop:\n%s", logs)
	}
}

// alarmRaised returns etcd's alarms once NOSPACE is raised, writing
// quotaValue-sized keys under prefix until it is (bounded by
// quotaFillMax).
func alarmRaised(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string) *clientv3.AlarmResponse {
	t.Helper()
	value := strings.Repeat("y", quotaValue)
	for i := 0; i < quotaFillMax; i++ {
		alarms, err := cli.AlarmList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(alarms.Alarms) > 0 {
			return alarms
		}
		if _, err := cli.Put(ctx, fmt.Sprintf("%s%d", prefix, i), value); err != nil && rpctypes.Error(err) != rpctypes.ErrNoSpace {
			t.Fatal(err)
		}
	}
	t.Fatalf("%d writes of %d KiB on a %d MiB quota: no NOSPACE alarm", quotaFillMax, quotaValue>>10, quotaBytes>>20)
	return nil
}
