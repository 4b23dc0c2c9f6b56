package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/apitest"
)

// The check of issue 40, at the process level: a backup taken under keyed
// load, more keys acknowledged after it, the primary killed, a new idemd
// started on a copy of the backup, and every key retried as the SDKs do
// (its original Repeatability-First-Sent). Each batch applies at most once.

// restoreKeys bounds the load: keys before, during and after the backup.
const restoreKeys = 30

// sentKey is one key's first exchange.
type sentKey struct {
	key, body, firstSent string
	status               int
	answer               []byte
}

// sendKey sends key's batch (its own counter doc, +1) first sent at (an
// HTTP-date: whole seconds, rounded down).
func sendKey(c *apitest.Client, key string, at time.Time) (sentKey, error) {
	s := sentKey{key: key, firstSent: at.UTC().Format(http.TimeFormat),
		body: fmt.Sprintf(`{"transforms":[{"id":"c-%s","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`, key)}
	r, err := c.Try("POST", "/v1/tables/t/batch", s.body, "Idempotency-Key", key, "Repeatability-First-Sent", s.firstSent)
	if err != nil {
		return s, err
	}
	s.status, s.answer = r.Status, r.Body
	if r.Status != 201 {
		return s, fmt.Errorf("key %s: %d %s", key, r.Status, r.Body)
	}
	return s, nil
}

// TestE2E_ARestoredBackupReplaysWhatItHoldsAndRefusesWhatItLost: keys
// acknowledged before the backup replay byte for byte on the restored
// copy; keys acknowledged after it are refused 409 key_may_have_executed
// (retry_with none), never executed; keys sent while it was taken do one
// or the other; no counter moves twice; a key without the header, or
// first sent after the restore, executes; /healthz and the log say the
// store was restored.
func TestE2E_ARestoredBackupReplaysWhatItHoldsAndRefusesWhatItLost(t *testing.T) {
	apitest.BuildIdemd(t)
	data, backups := t.TempDir(), t.TempDir()
	c := apitest.NewClient(t, "http://unused")
	p1 := apitest.Start(t, c, data, nil, "-backup-dir", backups)
	c1 := c.WithBase(p1.Base())
	c1.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)

	var before, during, after []sentKey
	for i := range restoreKeys {
		s, err := sendKey(c1, fmt.Sprintf("before-%d", i), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, s)
	}
	var wg sync.WaitGroup
	var loadErr error
	wg.Go(func() { // keyed load while the backup is taken
		for i := range restoreKeys {
			s, err := sendKey(c1, fmt.Sprintf("during-%d", i), time.Now())
			if err != nil {
				loadErr = err
				return
			}
			during = append(during, s)
		}
	})
	c1.Do("POST", "/v1/admin/backup", `{"name":"b1"}`).JSON(t, 200, nil)
	wg.Wait()
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	for i := range restoreKeys {
		s, err := sendKey(c1, fmt.Sprintf("after-%d", i), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, s)
	}
	c1.CloseIdleConnections()
	p1.Kill()

	restored := t.TempDir() // the operator's restore: a copy of the backup
	if err := os.CopyFS(restored, os.DirFS(filepath.Join(backups, "b1"))); err != nil {
		t.Fatal(err)
	}
	p2 := apitest.Start(t, c, restored, nil)
	c2 := c.WithBase(p2.Base())
	if !p2.WaitLog("restored from a backup", apitest.StartTimeout) {
		t.Fatalf("the start-up log does not say the store was restored:\n%s", p2.Logs())
	}
	var h struct {
		Restored *struct {
			FenceUntil time.Time `json:"fence_until"`
		} `json:"restored"`
	}
	c2.Do("GET", "/healthz", nil).JSON(t, 200, &h)
	if h.Restored == nil || h.Restored.FenceUntil.Before(time.Now().Add(23*time.Hour)) {
		t.Fatalf("/healthz restored %+v: want the fence for -retention (24h)", h.Restored)
	}

	retry := func(s sentKey) *apitest.Response {
		return c2.Do("POST", "/v1/tables/t/batch", s.body, "Idempotency-Key", s.key, "Repeatability-First-Sent", s.firstSent)
	}
	counter := func(key string) int {
		r := c2.Do("GET", "/v1/tables/t/docs/c-"+key, nil)
		if r.Status == 404 {
			return 0
		}
		var d struct {
			Doc struct{ N int } `json:"doc"`
		}
		if err := json.Unmarshal(r.Body, &d); err != nil || r.Status != 200 {
			t.Fatalf("doc c-%s: %d %s", key, r.Status, r.Body)
		}
		return d.Doc.N
	}
	for _, s := range before {
		r := retry(s)
		if r.Status != 201 || !bytes.Equal(r.Body, s.answer) || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("key %s acknowledged before the backup: %d %s, want the replay of %s", s.key, r.Status, r.Body, s.answer)
		}
		if n := counter(s.key); n != 1 {
			t.Fatalf("key %s: counter %d, want 1", s.key, n)
		}
	}
	refused := func(s sentKey, r *apitest.Response) {
		t.Helper()
		p := r.Problem(t, 409)
		if p.Code != "key_may_have_executed" || p.RetryWith != "none" || p.Outcome != "not_applied" || !strings.Contains(p.Detail, "may have executed between") {
			t.Fatalf("key %s lost with the backup: %s", s.key, r.Body)
		}
		if n := counter(s.key); n != 0 {
			t.Fatalf("key %s refused, but its counter is %d", s.key, n)
		}
	}
	replays := 0
	for _, s := range during {
		r := retry(s)
		if r.Status == 201 {
			replays++
			if !bytes.Equal(r.Body, s.answer) || counter(s.key) != 1 {
				t.Fatalf("key %s sent during the backup: %d %s (counter %d), want the replay of %s", s.key, r.Status, r.Body, counter(s.key), s.answer)
			}
			continue
		}
		refused(s, r)
	}
	for _, s := range after {
		refused(s, retry(s))
	}
	t.Logf("keys sent while the backup was taken: %d in it, %d refused", replays, len(during)-replays)

	// Unprotected (no header) and new keys execute.
	plain := sentKey{key: "plain", body: `{"transforms":[{"id":"c-plain","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`}
	if r := c2.Do("POST", "/v1/tables/t/batch", plain.body, "Idempotency-Key", "plain"); r.Status != 201 {
		t.Fatalf("a key without Repeatability-First-Sent: %d %s", r.Status, r.Body)
	}
	// A second ahead: rounded down to whole seconds it is still after the restore.
	if _, err := sendKey(c2, "new", time.Now().Add(time.Second)); err != nil {
		t.Fatalf("a key first sent after the restore: %v", err)
	}
}
