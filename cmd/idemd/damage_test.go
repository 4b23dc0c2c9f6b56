package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idemdb/idem/internal/apitest"
)

// TestE2E_ADamagedCopyRefusesOrServesEveryAcknowledgedBatch is the outside
// probe of issue 11: keyed batches are acknowledged by a real idemd, which
// is stopped cleanly; a copy of its data dir is damaged — a byte flipped in
// the newest WAL segment, the newest checkpoint cut short or deleted — and
// a new idemd starts on the copy. It must refuse to open, naming the file,
// or serve every acknowledged batch: never serve with one missing. The loss
// of any one checkpoint file — the newest link, the link before it, the
// base under them — must serve (issue 38).
func TestE2E_ADamagedCopyRefusesOrServesEveryAcknowledgedBatch(t *testing.T) {
	apitest.BuildIdemd(t)
	c := apitest.NewClient(t, "http://unused")
	data := t.TempDir()
	// Small checkpoints and segments, so that the log is truncated behind
	// several checkpoints: a lost checkpoint then really needs its
	// predecessor and the log kept from it.
	args := []string{"-checkpoint-bytes", "65536", "-wal-segment-bytes", "32768"}
	p := apitest.Start(t, c, data, nil, args...)
	cl := c.WithBase(p.Base())
	cl.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	const batches, writers = 400, damageWriters
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < batches; i += writers {
				key := fmt.Sprintf("k%04d", i)
				r, err := cl.Try("POST", "/v1/tables/t/batch", batchBody(i), "Idempotency-Key", key)
				if err != nil || r.Status != 201 {
					t.Errorf("batch %d: %v %v", i, r, err)
					return
				}
				mu.Lock()
				acked = append(acked, key)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	p.Term()
	if !strings.Contains(p.Logs(), "stopped cleanly") {
		t.Fatalf("idemd did not stop cleanly:\n%s", p.Logs())
	}
	// The links of the checkpoint chain kept — a base and the deltas on
	// it, perhaps the previous base — oldest first. Each base here is one
	// part: the store is far below a part's size.
	ckpts := append(filesMatching(t, data, "ckpt-*.ckpt"), filesMatching(t, data, "ckpt-*.delta")...)
	sort.Slice(ckpts, func(i, j int) bool { return filepath.Base(ckpts[i]) < filepath.Base(ckpts[j]) })
	segs := filesMatching(t, filepath.Join(data, "wal"), "[0-9]*")
	// Deltas are cheap, so checkpoints come often and the log may be down
	// to one segment: truncated all the same.
	if len(ckpts) < 2 || len(segs) < 1 || filepath.Base(segs[0]) == fmt.Sprintf("%020d", 1) {
		t.Fatalf("want two checkpoint links or more and a truncated log; have %v and %v", ckpts, segs)
	}
	// The newest segment may have just been created, and be empty: the
	// newest with bytes to flip is the one the log was writing.
	for len(segs) > 1 && fileSize(t, segs[len(segs)-1]) == 0 {
		segs = segs[:len(segs)-1]
	}
	newestSeg, newestCkpt := segs[len(segs)-1], ckpts[len(ckpts)-1]
	previousCkpt := ckpts[len(ckpts)-2]
	// The base the newest link stands on: the newest part file (issue 38:
	// its loss once made every open refuse).
	parts := filesMatching(t, data, "ckpt-*.ckpt")
	newestBase := parts[len(parts)-1]

	for _, tc := range []struct {
		name   string
		damage func(copy string)
		refuse string // "" when the copy must serve; else a file the refusal names
		// orServe: the copy may also serve, if the log still reaches back
		// past what was lost (it is cut by whole segments); then it must
		// serve every acknowledged batch.
		orServe bool
	}{
		{"flip at 25% of the newest segment", flipAt(newestSeg, 0.25), filepath.Base(newestSeg), false},
		{"flip at 75% of the newest segment", flipAt(newestSeg, 0.75), filepath.Base(newestSeg), false},
		{"flip in the last byte of the newest segment", flipAt(newestSeg, 1), filepath.Base(newestSeg), false},
		{"newest checkpoint cut to half", cutCheckpoint(newestCkpt), "", false},
		{"newest checkpoint deleted", removeFile(newestCkpt), "", false},
		// No single file's loss costs a write: the base the newest link
		// stands on falls back to the chain it replaced, or the log.
		{"the newest base cut to half", cutCheckpoint(newestBase), "", false},
		{"the newest base deleted", removeFile(newestBase), "", false},
		{olderLinkCase(newestCkpt), removeFile(previousCkpt), "", false},
		{"every checkpoint file deleted", func(copy string) {
			for _, f := range ckpts {
				removeFile(f)(copy)
			}
		}, checkpointOf(newestCkpt), false},
		// Losing two links loses data unless the log or the fallback chain
		// still holds it, and the open must then refuse.
		{"the two newest links deleted", func(copy string) {
			removeFile(previousCkpt)(copy)
			removeFile(newestCkpt)(copy)
		}, checkpointOf(newestCkpt), true},
	} {
		if tc.name == "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			copy := t.TempDir()
			copyDir(t, data, copy)
			tc.damage(copy)
			q, err := apitest.TryLaunch(t, copy, nil, args...)
			var early *apitest.EarlyExit
			if tc.refuse != "" && (!tc.orServe || errors.As(err, &early)) {
				if !errors.As(err, &early) {
					if err == nil {
						t.Fatalf("idemd served a damaged copy (%s)", tc.name)
					}
					t.Fatal(err)
				}
				if logs := early.Proc.Logs(); !strings.Contains(logs, "corruption") || !strings.Contains(logs, tc.refuse) {
					t.Fatalf("the refusal does not name %s as corrupt:\n%s", tc.refuse, logs)
				}
				return
			}
			if err != nil {
				t.Fatalf("idemd refused a copy it can recover (%s): %v", tc.name, err)
			}
			q.WaitHealthy(c)
			cq := c.WithBase(q.Base())
			for _, key := range acked {
				var i int
				fmt.Sscanf(key, "k%04d", &i)
				r := cq.Do("POST", "/v1/tables/t/batch", batchBody(i), "Idempotency-Key", key)
				if r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "true" {
					t.Fatalf("acknowledged batch %s: %d replayed=%q %s", key, r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
				}
				cq.Do("GET", fmt.Sprintf("/v1/tables/t/docs/d%04d", i), nil).JSON(t, 200, nil)
			}
			// A lost file may be off the open's path: a chain a merge
			// replaced, or a delta whose state a merged base at the same
			// index holds too. Then the open starts at the newest
			// checkpoint, needs no fallback, and says none; a fallback
			// must name what it stepped past.
			fellBack := recoveredCheckpoint(t, q.Logs()) < indexOf(checkpointOf(newestCkpt))
			if logs := q.Logs(); !tc.orServe && fellBack && !strings.Contains(logs, checkpointOf(newestCkpt)) && !strings.Contains(logs, checkpointOf(newestBase)) {
				t.Errorf("the fallback's warning does not name %s or %s:\n%s", checkpointOf(newestCkpt), checkpointOf(newestBase), logs)
			}
			if tc.orServe {
				t.Logf("served: the log still reaches back past the links lost")
			}
			if tc.orServe && !strings.Contains(q.Logs(), "missing or damaged") {
				t.Errorf("served a copy that lost checkpoint links without a warning:\n%s", q.Logs())
			}
			q.Kill()
		})
	}
}

// olderLinkCase names the case of losing the link before the newest,
// which a store must survive when the newest is a delta built on it; ""
// (no case) when the newest is a base, which needs nothing before it.
func olderLinkCase(newest string) string {
	if strings.HasSuffix(newest, ".delta") {
		return "the link before the newest delta deleted"
	}
	return ""
}

// indexOf is the log index a checkpoint's name (checkpointOf) carries.
func indexOf(ckpt string) uint64 {
	n, _ := strconv.ParseUint(strings.TrimPrefix(ckpt, "ckpt-"), 10, 64)
	return n
}

// recoveredCheckpoint is the checkpoint index idemd's "recovered" line
// says the open started from.
func recoveredCheckpoint(t *testing.T, logs string) uint64 {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		var rec struct {
			Msg        string `json:"msg"`
			Checkpoint uint64 `json:"checkpoint"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "idemd: recovered" {
			return rec.Checkpoint
		}
	}
	t.Fatalf("no recovered line in the logs:\n%s", logs)
	return 0
}

// checkpointOf is the name of the checkpoint a part file belongs to
// (ckpt-<index>), as the server's messages give it.
func checkpointOf(part string) string {
	base := filepath.Base(part)
	return base[:len("ckpt-")+20]
}

// batchBody inserts document i and rewrites its writer's own document
// (writers take every batch ≡ w mod writers, one at a time: no conflicts),
// so that the log outgrows the store and checkpoints truncate it: a log of
// inserts alone is about the store's size, which a first base waits for.
func batchBody(i int) string {
	return fmt.Sprintf(`{"inserts":[{"id":"d%04d","doc":{"n":%d,"pad":%q}}],"transforms":[{"id":"w%d","ops":[{"op":"$set","path":"pad","value":%q}],"upsert":true}]}`,
		i, i, strings.Repeat("p", 150), i%damageWriters, strings.Repeat("q", 300))
}

// damageWriters is how many clients write batchBody's batches at once.
const damageWriters = 8

func filesMatching(t *testing.T, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range m {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && !strings.Contains(filepath.Base(p), ".") {
			out = append(out, p)
		} else if isCheckpointFile(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// isCheckpointFile: a base's part or a delta.
func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func isCheckpointFile(p string) bool {
	return strings.HasSuffix(p, ".ckpt") || strings.HasSuffix(p, ".delta")
}

// inCopy maps a path under the original data dir to the same path in copy.
func inCopy(orig, copy string) string {
	i := strings.Index(orig, string(filepath.Separator)+"wal"+string(filepath.Separator))
	if isCheckpointFile(orig) || i < 0 {
		return filepath.Join(copy, filepath.Base(orig))
	}
	return filepath.Join(copy, "wal", filepath.Base(orig))
}

func flipAt(seg string, at float64) func(copy string) {
	return func(copy string) {
		p := inCopy(seg, copy)
		b, err := os.ReadFile(p)
		if err != nil {
			panic(err)
		}
		i := min(int(at*float64(len(b))), len(b)-1)
		b[i] ^= 0x20
		if err := os.WriteFile(p, b, 0o640); err != nil {
			panic(err)
		}
	}
}

func cutCheckpoint(ckpt string) func(copy string) {
	return func(copy string) {
		p := inCopy(ckpt, copy)
		fi, err := os.Stat(p)
		if err != nil {
			panic(err)
		}
		if err := os.Truncate(p, fi.Size()/2); err != nil {
			panic(err)
		}
	}
}

func removeFile(f string) func(copy string) {
	return func(copy string) {
		if err := os.Remove(inCopy(f, copy)); err != nil {
			panic(err)
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if fi.IsDir() {
			return os.MkdirAll(dst, 0o750)
		}
		if fi.Name() == "LOCK" {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, src); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}
