package wal

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/vfs/errorfs"
)

// Out of file descriptors (issue 35): EMFILE or ENFILE on an open is a
// flood of connections, not a disk error. The log waits it out and never
// fail-stops for it; a real I/O error still fail-stops.

// noSpare makes every segment roll open a new file.
var noSpare = Options{SegmentBytes: 512, NoPreallocation: true}

// appendAcked appends n entries one group at a time, each longer than a
// tenth of a segment, and returns their bodies.
func appendAcked(t *testing.T, l *Log, from, n int) []string {
	t.Helper()
	var acked []string
	for i := from; i < from+n; i++ {
		b := fmt.Sprintf("e%04d-%s", i, strings.Repeat("p", 60))
		if err := appendGroup(l, []byte(b)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		acked = append(acked, b)
	}
	return acked
}

func TestDescriptors_ASegmentRollWaitsOutAShortage(t *testing.T) {
	for _, short := range []error{errorfs.EMFILE, errorfs.ENFILE} {
		t.Run(short.Error(), func(t *testing.T) {
			d := newMemDisk()
			l, _ := d.mustOpen(t, noSpare)
			acked := appendAcked(t, l, 0, 3)
			segs := len(d.segments(t))
			// The next segment's open fails 3 times, then works.
			d.efs.Add(errorfs.Rule{Op: errorfs.OpCreate, PathContains: "/0000", Times: 3, Err: short})
			acked = append(acked, appendAcked(t, l, 3, 20)...) // several rolls
			if n := len(d.segments(t)); n <= segs+1 {
				t.Fatalf("%d segments after the appends, want more than %d (the test must roll)", n, segs+1)
			}
			if w := l.Stats().DescriptorWaits; w != 1 {
				t.Errorf("Stats.DescriptorWaits %d, want 1", w)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			got, _, err := d.replay(noSpare)
			if err != nil || !slices.Equal(got, acked) {
				t.Fatalf("after reopen: %d entries, %v; want the %d acknowledged", len(got), err, len(acked))
			}
		})
	}
}

// With a spare ready, a segment roll opens nothing at all: it writes
// through the spare's descriptor and syncs the directory through the
// log's own, so it goes on while every open fails. (A roll that opened a
// file would wait here until the test's timeout.)
func TestDescriptors_ARollOnASpareNeedsNoDescriptor(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, preallocOpts)
	var acked []string
	writeUntilPreallocated(t, l, &acked, 1)
	// The next spare is made once the tail holds enough: write on until
	// it is ready, or polling for it would wait for ever.
	testsupport.Poll(t, "a spare ready", testsupport.Patience, func() bool {
		if l.prealloc.ready() {
			return true
		}
		appendSync(t, l, body(uint64(len(acked)+1)))
		acked = append(acked, string(body(uint64(len(acked)+1))))
		return false
	})
	taken := l.Stats().Preallocated
	for _, op := range []errorfs.Op{errorfs.OpOpen, errorfs.OpCreate} {
		d.efs.Add(errorfs.Rule{Op: op, Sticky: true, Err: errorfs.EMFILE})
	}
	for i := 0; l.Stats().Preallocated == taken; i++ {
		if i == 1000 {
			t.Fatal("no roll after 1000 appends")
		}
		b := body(uint64(len(acked) + 1))
		if err := appendGroup(l, b); err != nil {
			t.Fatalf("append %d while out of descriptors: %v", len(acked)+1, err)
		}
		acked = append(acked, string(b))
	}
	if w := l.Stats().DescriptorWaits; w != 0 {
		t.Errorf("Stats.DescriptorWaits %d: the roll opened a file", w)
	}
	d.efs.Clear()
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	got, _, err := d.replay(preallocOpts)
	if err != nil || !slices.Equal(got, acked) {
		t.Fatalf("after reopen: %d entries, %v; want the %d acknowledged", len(got), err, len(acked))
	}
}

// A real I/O error on the same open still fail-stops, as it always did.
func TestDescriptors_EIOOnASegmentRollStillFailStops(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, noSpare)
	acked := appendAcked(t, l, 0, 3)
	d.efs.Add(errorfs.Rule{Op: errorfs.OpCreate, PathContains: "/0000", Err: errorfs.EIO})
	var err error
	for i := 3; err == nil; i++ {
		if i == 100 {
			t.Fatal("no roll after 100 appends")
		}
		b := fmt.Sprintf("e%04d-%s", i, strings.Repeat("p", 60))
		if err = appendGroup(l, []byte(b)); err == nil {
			acked = append(acked, b)
		}
	}
	if !errors.Is(err, ErrAmbiguous) || !errors.Is(err, errorfs.EIO) {
		t.Fatalf("append whose segment open failed with EIO: %v, want ErrAmbiguous wrapping EIO", err)
	}
	if err := appendGroup(l, []byte("after")); !errors.Is(err, ErrFailStopped) {
		t.Fatalf("append after: %v, want ErrFailStopped", err)
	}
	if w := l.Stats().DescriptorWaits; w != 0 {
		t.Errorf("Stats.DescriptorWaits %d after an EIO, want 0", w)
	}
	l.Close()
	got, _, err := d.replay(noSpare)
	if err != nil || len(got) < len(acked) || !slices.Equal(got[:len(acked)], acked) {
		t.Fatalf("after reopen: %d entries, %v; want the %d acknowledged first", len(got), err, len(acked))
	}
}

// Close while an open keeps failing with EMFILE returns: the wait ends,
// the waiting group fails as ambiguous (it was never acknowledged), and
// what was acknowledged before is all there after a reopen.
func TestDescriptors_CloseEndsAWait(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, noSpare)
	acked := appendAcked(t, l, 0, 3)
	d.efs.Add(errorfs.Rule{Op: errorfs.OpCreate, PathContains: "/0000", Sticky: true, Err: errorfs.EMFILE})
	stuck := make(chan error, 1)
	go func() {
		for i := 3; ; i++ {
			b := fmt.Sprintf("e%04d-%s", i, strings.Repeat("p", 60))
			if err := appendGroup(l, []byte(b)); err != nil {
				stuck <- err
				return
			}
			acked = append(acked, b) // read only after stuck
		}
	}()
	testsupport.Poll(t, "an open waiting for a descriptor", testsupport.Patience, func() bool { return l.fds.Waiting() > 0 })
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case <-closed:
	case <-time.After(testsupport.Patience):
		t.Fatal("Close hangs while an open waits for a descriptor")
	}
	if err := <-stuck; !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("the waiting append: %v, want ErrAmbiguous", err)
	}
	d.efs.Clear()
	got, _, err := d.replay(noSpare)
	if err != nil || len(got) < len(acked) || !slices.Equal(got[:len(acked)], acked) {
		t.Fatalf("after reopen: %d entries, %v; want the %d acknowledged first", len(got), err, len(acked))
	}
}
