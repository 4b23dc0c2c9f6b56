package apitest

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	RemoveBuilds()
	os.Exit(code)
}

// TestLaunch_FailpointsOnlyWhenPassed: GO_FAILPOINTS in the test's own
// environment never reaches the child; passed explicitly it does (here it
// crashes the first WAL write, the incarnation bump, before the process
// listens: TryLaunch reports the early exit with the panic in its logs).
func TestLaunch_FailpointsOnlyWhenPassed(t *testing.T) {
	crash := "GO_FAILPOINTS=wal/sync-after=panic(\"at-start\")"
	name, value, _ := strings.Cut(crash, "=")
	t.Setenv(name, value)
	c := NewClient(t, "http://unused")
	p := Start(t, c, t.TempDir(), nil)
	if p.WaitLog("failpoint panic", 0) {
		t.Fatalf("an inherited failpoint fired:\n%s", p.Logs())
	}
	if !p.WaitLog(`"msg":"idemd: listening"`, time.Second) || p.State() != nil {
		t.Fatalf("WaitLog/State on a running process:\n%s", p.Logs())
	}
	p.Term()
	if p.State() == nil || !p.State().Success() || p.Err() != nil {
		t.Fatalf("after Term: %v, %v", p.State(), p.Err())
	}

	_, err := TryLaunch(t, t.TempDir(), []string{crash})
	var early *EarlyExit
	if !errors.As(err, &early) {
		t.Fatalf("TryLaunch with a failpoint crashing the start: %v", err)
	}
	if !early.Proc.WaitLog("panic: failpoint panic: at-start", time.Second) || early.Proc.State().ExitCode() != 2 {
		t.Fatalf("early exit %v without the failpoint's panic:\n%s", early.Proc.State(), early.Proc.Logs())
	}
}
