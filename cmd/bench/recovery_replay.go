package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/store"
)

// The replay rate (issue 38): a restart replays at most about two
// checkpoint intervals of log, so its time is that log over the replay
// rate. recovery:replay times an open that replays one interval of log
// left by keyed requests — small entries of three puts, as a keyed batch
// writes them (531 log bytes per request, measured) — and
// recovery:read-floor reads the same segment files sequentially in the
// same run: what replay would cost if decoding and applying were free.

const (
	// replayLogBytes is the log replayed: one default checkpoint interval
	// (quick tour: a quarter of it).
	replayLogBytes       = 64 << 20
	replayLogBytesQuick  = 16 << 20
	replayLogBytesPerKey = 160 // scales the quick log to -keys below 100 000
	// replayWriters fill the log at once, so group commit keeps the
	// build short; replayValueBytes is each put's value.
	replayWriters    = 64
	replayValueBytes = 140
	// targetReplayToReadFloor is the aim: replay at ≥ 0.25 × the
	// sequential read of the same files.
	targetReplayToReadFloor = 0.25
)

// replayRecovery builds a store whose log after its checkpoint is one
// interval of small entries, then reports the read floor and the replay.
func replayRecovery(env *Env) error {
	dir, cleanup, err := env.DataDir("replay")
	if err != nil {
		return err
	}
	defer cleanup()
	want := int64(replayLogBytes)
	if env.Opts.Keys < 1_000_000 {
		// The quick tour, and its tests' tiny stores (-keys 2000: 320 KiB).
		want = min(replayLogBytesQuick, int64(env.Opts.Keys)*replayLogBytesPerKey)
	}
	if err := buildReplayLog(env, dir, want); err != nil {
		return err
	}
	floorMBps, err := reportReadFloor(env, filepath.Join(dir, "wal"), false)
	if err != nil {
		return err
	}

	env.Progress("%s/replay reopening", env.Suite())
	used, start := processUsage(), time.Now()
	db, err := engine.Open(dir, engine.Options{CheckpointLogBytes: -1, Logger: discardLogger, CollectorOffAtOpen: true})
	seconds, usedAfter := time.Since(start).Seconds(), processUsage()
	env.ProgressDone()
	if err != nil {
		return fmt.Errorf("replay: reopen: %w", err)
	}
	rec := db.Stats().Recovery
	if err := db.Close(); err != nil {
		return err
	}
	// Last, so that its buffers, once freed, are no other read's memory.
	diskMBps, err := reportReadFloor(env, filepath.Join(dir, "wal"), true)
	if err != nil {
		return err
	}
	mbps := float64(rec.ReplayedBytes) / seconds / 1e6
	r := Result{Case: "replay", Concurrency: 1, Ops: uint64(rec.ReplayedEntries), Seconds: seconds,
		OpsPerSec: float64(rec.ReplayedEntries) / seconds, NoFloorRatio: true}
	r.Set("open_seconds", round(seconds, 4))
	setUsage(&r, used, usedAfter)
	r.Set("replayed_bytes", rec.ReplayedBytes)
	r.Set("replayed_entries", rec.ReplayedEntries)
	r.Set("mb_per_sec", round(mbps, 1))
	r.Set("entries_per_sec", round(float64(rec.ReplayedEntries)/seconds, 0))
	ratio := mbps / floorMBps
	r.Set("ratio_to_read_floor", round(ratio, 3))
	if diskMBps > 0 {
		r.Set("ratio_to_disk_floor", round(mbps/diskMBps, 3))
	}
	r.Targets = append(r.Targets, Target{
		Want:  fmt.Sprintf("replay >= %.2f x the read floor (%.0f MB/s)", targetReplayToReadFloor, floorMBps),
		Got:   fmt.Sprintf("%.1f MB/s (%.3fx)", mbps, ratio),
		Met:   ratio >= targetReplayToReadFloor,
		Score: atLeast(ratio, targetReplayToReadFloor),
	})
	env.Report(r)
	return nil
}

// buildReplayLog writes a small checkpoint, then keyed-request-sized
// batches until the log after it holds want bytes, and closes the store
// without another checkpoint.
func buildReplayLog(env *Env, dir string, want int64) error {
	db, err := engine.Open(dir, engine.Options{CheckpointLogBytes: -1, Logger: discardLogger, CollectorOffAtOpen: true})
	if err != nil {
		return err
	}
	value := make([]byte, replayValueBytes)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	var logged atomic.Int64
	var next atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, replayWriters)
	ctx := context.Background()
	for w := 0; w < replayWriters; w++ {
		wg.Go(func() {
			var b store.Batch
			key := make([]byte, 0, 64)
			for logged.Load() < want {
				i := next.Add(1)
				b.Reset()
				for j, ns := range [...]string{"rcpt/v1/", "exp/v1/", "tbl/v1/replay/doc/"} {
					key = strconv.AppendUint(append(key[:0], ns...), i, 10)
					b.Put(append([]byte(nil), key...), value[:replayValueBytes-j*40])
				}
				if _, err := db.Apply(ctx, &b); err != nil {
					errs <- err
					return
				}
				logged.Add(int64(replayValueBytes*3 + 3*30))
				if i%10_000 == 0 {
					env.Progress("%s/replay building the log: %d MB of %d", env.Suite(), logged.Load()>>20, want>>20)
				}
			}
		})
	}
	wg.Wait()
	env.ProgressDone()
	close(errs)
	err = <-errs
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// reportReadFloor reports recovery:read-floor, the log's segment files
// read sequentially from the page cache, or with cold
// recovery:read-floor-disk: the same read after their pages were dropped
// from the cache, i.e. at the disk's speed, which is what issue 38 asks a
// replay to approach ("the disk reads those bytes in milliseconds"). The
// aim is judged against the first, the stricter: a crashed process's log
// is usually still in the cache. It returns the MB/s, 0 for a cold read
// where the page cache cannot be dropped (not Linux).
func reportReadFloor(env *Env, dir string, cold bool) (float64, error) {
	n, seconds, err := readFloor(dir, cold)
	if cold && errors.Is(err, errors.ErrUnsupported) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	name := "read-floor"
	if cold {
		name = "read-floor-disk"
	}
	mbps := float64(n) / seconds / 1e6
	r := Result{Case: name, Concurrency: 1, Ops: uint64(n), Seconds: seconds,
		OpsPerSec: float64(n) / seconds, NoFloorRatio: true}
	r.Set("mb_per_sec", round(mbps, 1))
	r.Set("bytes", n)
	env.Report(r)
	return mbps, nil
}

// readFloor reads every segment file in dir sequentially, as replay does
// (one whole segment at a time), and returns the bytes and seconds; with
// cold, each segment's pages are dropped from the page cache first (they are
// clean: the log fsynced them), so the read is the disk's.
func readFloor(dir string, cold bool) (int64, float64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	segs := slices.DeleteFunc(ents, func(e os.DirEntry) bool {
		return e.IsDir() || len(e.Name()) != 20 // segments only: not the spare, nor the close marker
	})
	if cold {
		for _, e := range segs {
			if err := dropCache(filepath.Join(dir, e.Name())); err != nil {
				return 0, 0, err
			}
		}
	}
	var n int64
	start := time.Now()
	for _, e := range segs {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return 0, 0, err
		}
		n += int64(len(b))
	}
	return n, time.Since(start).Seconds(), nil
}
