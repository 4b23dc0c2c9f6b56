package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/store"
)

// TestRestoreEpoch_EveryFormatWrittenDecodes: the fixture of each format
// ever written decodes to its times (docs/upgrading.md), and this build
// writes format 1 byte for byte as the fixture holds it.
func TestRestoreEpoch_EveryFormatWrittenDecodes(t *testing.T) {
	b, err := os.ReadFile("testdata/restore-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	e, err := decodeRestore(b)
	want := RestoreEpoch{Format: 1, RestoredAt: time.Date(2026, 12, 5, 5, 0, 0, 123456789, time.UTC), BackupTime: time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)}
	if err != nil || !e.same(want) {
		t.Fatalf("restore-v1.json: %+v %v, want %+v", e, err, want)
	}
	again, err := encodeRestore(RestoreEpoch{RestoredAt: want.RestoredAt.In(time.FixedZone("x", 3600)), BackupTime: want.BackupTime})
	if err != nil || !bytes.Equal(again, bytes.TrimSpace(b)) {
		t.Fatalf("encoded %s %v, want the fixture %s", again, err, b)
	}
}

// TestRestoreEpoch_DecodeRefusesWhatIsNoEpoch: another format, a missing
// time or bytes that are no JSON are corruption, never a fence of zero
// times (which would fence nothing, silently).
func TestRestoreEpoch_DecodeRefusesWhatIsNoEpoch(t *testing.T) {
	for _, v := range []string{
		`{"format":2,"restored_at":"2026-12-05T05:00:00Z","backup_time":"2026-12-05T04:00:00Z"}`,
		`{"format":1,"backup_time":"2026-12-05T04:00:00Z"}`,
		`{"format":1,"restored_at":"2026-12-05T05:00:00Z"}`,
		`{}`, ``, `not json`,
	} {
		if e, err := decodeRestore([]byte(v)); !errors.Is(err, store.ErrCorruption) {
			t.Errorf("%q: %+v %v, want ErrCorruption", v, e, err)
		}
	}
}

// TestRecordRestore_WritesOnceAndNeverMovesTheEpoch: the first record
// is in force; a second (the same restore recorded again, or another)
// leaves it as it was; replace records a later restore over it.
func TestRecordRestore_WritesOnceAndNeverMovesTheEpoch(t *testing.T) {
	ctx := context.Background()
	db, err := engine.Open(t.TempDir(), engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, ok, err := ReadRestore(ctx, db); ok || err != nil {
		t.Fatalf("a store never restored: ok=%v %v", ok, err)
	}
	backup := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	first := RestoreEpoch{RestoredAt: backup.Add(time.Hour), BackupTime: backup}
	got, wrote, err := RecordRestore(ctx, db, first, false)
	if err != nil || !wrote || !got.same(RestoreEpoch{Format: restoreFormat, RestoredAt: first.RestoredAt, BackupTime: backup}) {
		t.Fatalf("the first record: %+v wrote=%v %v", got, wrote, err)
	}
	for _, later := range []RestoreEpoch{{RestoredAt: backup.Add(2 * time.Hour), BackupTime: backup}, {RestoredAt: backup.Add(3 * time.Hour), BackupTime: backup.Add(time.Minute)}} {
		got, wrote, err := RecordRestore(ctx, db, later, false)
		if err != nil || wrote || !got.RestoredAt.Equal(first.RestoredAt) {
			t.Fatalf("recording %+v over the first: %+v wrote=%v %v, want the first unchanged", later, got, wrote, err)
		}
	}
	second := RestoreEpoch{RestoredAt: backup.Add(4 * time.Hour), BackupTime: backup.Add(time.Minute)}
	if got, wrote, err := RecordRestore(ctx, db, second, true); err != nil || !wrote || !got.RestoredAt.Equal(second.RestoredAt) {
		t.Fatalf("replace with a later restore: %+v wrote=%v %v", got, wrote, err)
	}
	if e, ok, err := ReadRestore(ctx, db); !ok || err != nil || !e.RestoredAt.Equal(second.RestoredAt) || !e.BackupTime.Equal(second.BackupTime) {
		t.Fatalf("read back: %+v ok=%v %v, want %+v", e, ok, err, second)
	}
}
