package etcdtest_test

import (
	"bytes"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/internal/apitest"
)

// The restore fence on etcd (docs/design.md §15, docs/operations.md): after
// `etcdutl snapshot restore` the operator records the restore epoch under
// the prefix with `idemctl etcd-restored`, and every node started after
// fences the keys the snapshot may have lost.

// restoreCounterBody adds one to key's own counter doc.
func restoreCounterBody(key string) string {
	return `{"transforms":[{"id":"c-` + key + `","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`
}

// etcdRestored runs `idemctl etcd-restored` against c under prefix and
// returns its exit status and output.
func etcdRestored(t *testing.T, c *etcdtest.Cluster, prefix string, args ...string) (int, string) {
	t.Helper()
	argv := append([]string{"etcd-restored", "-etcd-endpoints", strings.Join(c.Endpoints(), ","), "-etcd-prefix", prefix}, args...)
	out, err := exec.Command(apitest.BuildIdemctl(t), argv...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("idemctl %v: %v\n%s", argv, err, out)
	}
	return 0, string(out)
}

// TestIdemd_ARestoreRecordedOnEtcdFencesEveryNodeStartedAfter: a key
// committed before the restore replays byte for byte on a node started
// after it is recorded; an unknown key first sent before the restore is
// refused 409 key_may_have_executed and nothing executes; a key without
// Repeatability-First-Sent executes. Recording twice never moves the
// epoch; another backup time is refused without -force.
func TestIdemd_ARestoreRecordedOnEtcdFencesEveryNodeStartedAfter(t *testing.T) {
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	cl := apitest.NewClient(t, "http://unused")
	backupTime := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	firstSent := time.Now().UTC().Add(-time.Second).Format(http.TimeFormat)

	a := startNode(t, cl, c, prefix, "node-a", nil)
	ca := cl.WithBase(a.Base())
	ca.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	known := ca.Do("POST", "/v1/tables/t/batch", restoreCounterBody("known"), "Idempotency-Key", "known", "Repeatability-First-Sent", firstSent)
	if known.Status != 201 {
		t.Fatalf("the key committed before the restore: %d %s", known.Status, known.Body)
	}
	ca.CloseIdleConnections()
	a.Term()

	if code, out := etcdRestored(t, c, prefix, "-backup-time", backupTime); code != 0 || !strings.Contains(out, "recorded the restore epoch") {
		t.Fatalf("idemctl etcd-restored: exit %d\n%s", code, out)
	}
	restoredAt := time.Now()
	if code, out := etcdRestored(t, c, prefix, "-backup-time", backupTime); code != 0 || !strings.Contains(out, "recorded already") {
		t.Fatalf("idemctl etcd-restored for the same backup again: exit %d, want 0 and the epoch unchanged\n%s", code, out)
	}
	if code, out := etcdRestored(t, c, prefix, "-backup-time", time.Now().UTC().Format(time.RFC3339)); code != 1 {
		t.Fatalf("idemctl etcd-restored for another backup without -force: exit %d, want 1\n%s", code, out)
	}

	b := startNode(t, cl, c, prefix, "node-b", nil)
	cb := cl.WithBase(b.Base())
	if !b.WaitLog("restored from a backup", apitest.StartTimeout) {
		t.Fatalf("node-b's start-up log does not say the store was restored:\n%s", b.Logs())
	}
	checkRestoredHealth(t, cb, backupTime, restoredAt)

	if r := cb.Do("POST", "/v1/tables/t/batch", restoreCounterBody("known"), "Idempotency-Key", "known", "Repeatability-First-Sent", firstSent); r.Status != 201 ||
		!bytes.Equal(r.Body, known.Body) || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the known key after the restore: %d %s, want the replay of %s", r.Status, r.Body, known.Body)
	}
	lost := cb.Do("POST", "/v1/tables/t/batch", restoreCounterBody("lost"), "Idempotency-Key", "lost", "Repeatability-First-Sent", firstSent)
	if p := lost.Problem(t, 409); p.Code != "key_may_have_executed" || p.RetryWith != "none" || p.Outcome != "not_applied" {
		t.Fatalf("an unknown key first sent before the restore: %s", lost.Body)
	}
	if r := cb.Do("GET", "/v1/tables/t/docs/c-lost", nil); r.Status != 404 {
		t.Fatalf("the refused key's counter: %d %s, want 404: nothing executed", r.Status, r.Body)
	}
	if r := cb.Do("POST", "/v1/tables/t/batch", restoreCounterBody("plain"), "Idempotency-Key", "plain"); r.Status != 201 {
		t.Fatalf("a key without Repeatability-First-Sent: %d %s, want it executed (unprotected)", r.Status, r.Body)
	}
}

// checkRestoredHealth: /healthz shows the recorded epoch and a fence for
// -retention (24h by default) after it.
func checkRestoredHealth(t *testing.T, c *apitest.Client, backupTime string, restoredBy time.Time) {
	t.Helper()
	var h struct {
		Restored *struct {
			RestoredAt time.Time `json:"restored_at"`
			BackupTime time.Time `json:"backup_time"`
			FenceUntil time.Time `json:"fence_until"`
		} `json:"restored"`
	}
	c.Do("GET", "/healthz", nil).JSON(t, 200, &h)
	if h.Restored == nil || h.Restored.BackupTime.Format(time.RFC3339) != backupTime || h.Restored.RestoredAt.After(restoredBy) ||
		h.Restored.FenceUntil.Before(time.Now().Add(23*time.Hour)) {
		t.Fatalf("/healthz restored %+v: want backup_time %s, restored_at by %v and the fence for -retention (24h)", h.Restored, backupTime, restoredBy)
	}
}
