package main

import (
	"bytes"
	"debug/buildinfo"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/apitest"
)

// TestRelease_GOFailpointsDoNothing: the release build (`make build`,
// -tags nofailpoint) cannot be told to break. It links no
// pingcap/failpoint code, and with GO_FAILPOINTS arming an fsync error on
// every WAL group and a crash before every new receipt it still commits a
// keyed batch and replays it, before and after a SIGKILL restart.
//
// The control: the same GO_FAILPOINTS makes the test build (BuildIdemd)
// fail-stop on its first WAL write, before it listens, so a misspelled
// failpoint cannot make this test pass vacuously. That an explicit
// GO_FAILPOINTS reaches the test build is covered more widely by
// apitest.TestLaunch_FailpointsOnlyWhenPassed (wal/sync-after=panic at
// start), TestE2E_RestartReplaysEveryTerminalAnswer
// (receipt/decide-before) and harness.TestChaos_ProcessCrashesAtFailpointsConverge
// (a panic at each crash point, under load).
func TestRelease_GOFailpointsDoNothing(t *testing.T) {
	t.Parallel()
	failpoints := "GO_FAILPOINTS=" + fault.WALSyncBefore + `=return("eio");` + fault.ReceiptCreateBefore + "=panic"
	rel := apitest.BuildIdemdRelease(t)
	apitest.BuildIdemd(t) // the control's, built before any process starts its clock

	info, err := buildinfo.ReadFile(rel)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range info.Deps {
		if strings.HasPrefix(d.Path, "github.com/pingcap/") {
			t.Errorf("the release build links %s %s", d.Path, d.Version)
		}
	}
	tagged := false
	for _, s := range info.Settings {
		tagged = tagged || s.Key == "-tags" && strings.Contains(s.Value, "nofailpoint")
	}
	if !tagged {
		t.Errorf("the release build was not built with -tags nofailpoint: %v", info.Settings)
	}

	c := apitest.NewClient(t, "http://unused")
	data := t.TempDir()
	p1 := apitest.StartBinary(t, c, rel, data, []string{failpoints})
	c1 := c.WithBase(p1.Base())
	c1.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	body := `{"inserts":[{"id":"a","doc":{"v":1}}],"transforms":[{"id":"n","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`
	post := func(cl *apitest.Client) *apitest.Response {
		return cl.Do("POST", "/v1/tables/t/batch", body, "Idempotency-Key", "k-release")
	}
	first := post(c1)
	first.JSON(t, 201, nil)
	if first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first answer marked as a replay: %v", first.Header)
	}
	replayed := func(where string, r *apitest.Response) {
		t.Helper()
		if r.Status != 201 || !bytes.Equal(r.Body, first.Body) || r.Header.Get("Idempotent-Replayed") != "true" ||
			r.Header.Get("Idem-Transaction-Id") != first.Header.Get("Idem-Transaction-Id") {
			t.Fatalf("replay %s: %d %s %v; first %d %s %v", where, r.Status, r.Body, r.Header, first.Status, first.Body, first.Header)
		}
	}
	replayed("in the same process", post(c1))
	c1.CloseIdleConnections()
	p1.Kill()

	p2 := apitest.StartBinary(t, c, rel, data, []string{failpoints})
	c2 := c.WithBase(p2.Base())
	replayed("after a SIGKILL restart", post(c2))
	var n struct {
		Doc map[string]any `json:"doc"`
	}
	c2.Do("GET", "/v1/tables/t/docs/n", nil).JSON(t, 200, &n)
	if n.Doc["n"] != float64(1) {
		t.Fatalf("counter after a commit and two replays: %v, want 1", n.Doc)
	}
	c2.CloseIdleConnections()
	p2.Term()
	for _, p := range []*apitest.Proc{p1, p2} {
		if logs := p.Logs(); strings.Contains(logs, "fault: injected") || strings.Contains(logs, "failpoint panic") {
			t.Fatalf("a failpoint fired in the release build:\n%s", logs)
		}
	}
	if !strings.Contains(p1.Logs(), "GO_FAILPOINTS is set but this is the release build") {
		t.Fatalf("the release build did not warn that GO_FAILPOINTS arms nothing:\n%s", p1.Logs())
	}

	// Control: the test build obeys the same GO_FAILPOINTS.
	_, err = apitest.TryLaunch(t, t.TempDir(), []string{failpoints})
	var early *apitest.EarlyExit
	if !errors.As(err, &early) {
		t.Fatalf("the test build started despite %s: %v", failpoints, err)
	}
	if !early.Proc.WaitLog("fault: injected at "+fault.WALSyncBefore, time.Second) {
		t.Fatalf("the test build exited without the injected fsync error:\n%s", early.Proc.Logs())
	}
}
