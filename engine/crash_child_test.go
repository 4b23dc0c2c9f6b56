package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
)

// The crash is real here: the test binary re-executes itself as a child
// with a failpoint armed through GO_FAILPOINTS to panic, runs the workload
// until the process dies mid-write, and the parent recovers the data dir and
// checks it against what the child reported (one TRY line before each Apply,
// one RES line after).

const childDirEnv = "IDEM_ENGINE_CRASH_CHILD_DIR"

func TestCrash_ChildProcessKilledByFailpointRecovers(t *testing.T) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		crashChild(t, dir)
		return
	}
	testsupport.RequireFailpoints(t)
	seed := seedFor(t)
	for i, fp := range []struct{ name, terms string }{
		{fault.WALSyncAfter, "1%panic"},  // durable, nobody told
		{fault.WALWriteAfter, "1%panic"}, // in the page cache only
		{fault.CkptRenameBefore, "10%panic"},
		{fault.WALTruncateBefore, "25%panic"},
	} {
		t.Run(fp.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrash_ChildProcessKilledByFailpointRecovers$", "-test.count=1")
			cmd.Env = append(os.Environ(),
				childDirEnv+"="+dir,
				"GO_FAILPOINTS="+fp.name+"="+fp.terms,
				"IDEM_TEST_SEED="+strconv.FormatUint(seed+uint64(i), 10),
			)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("child did not die (%v); stderr:\n%s", err, tail(stderr.String()))
			}
			if !strings.Contains(stderr.String(), "failpoint panic") {
				t.Fatalf("child died, but not at the failpoint (%v); stderr:\n%s", err, tail(stderr.String()))
			}
			h, err := parseHistory(&stdout)
			if err != nil {
				t.Fatalf("child report: %v", err)
			}
			opts := crashOpts()
			db, err := Open(dir, opts)
			if err != nil {
				t.Fatalf("reopen after the child died at %s: %v", fp.name, err)
			}
			state := verifyRecovered(t, db, h, false)
			if t.Failed() {
				t.Logf("child outcomes %v", h.counts())
			}
			afterRecovery(t, dir, opts, db, state)
		})
	}
}

// crashChild runs in the child process: the workload until the armed
// failpoint panics the process. Reaching the end is a failure.
func crashChild(t *testing.T, dir string) {
	db, err := Open(dir, crashOpts())
	if err != nil {
		t.Fatal(err)
	}
	h := newHistory()
	h.report = os.Stdout
	w := &workload{db: db, h: h, keys: 12, workers: 4, ckptEvery: 4, maxOps: 3000}
	w.run(t, seedFor(t), nil)
	t.Fatalf("child finished its workload without crashing (%v)", h.counts())
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}
