package receipt_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// TestValueLog_ReplayFromTheValueLogIsExactAndDamageIsNeverServed: once a
// checkpoint moved a terminal receipt to the value log, a retry replays the
// same envelope, across a crash; a damaged record is an error wrapping
// store.ErrCorruption — never served as an envelope, never taken for an
// absent receipt (which would run the batch again).
func TestValueLog_ReplayFromTheValueLogIsExactAndDamageIsNeverServed(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.Options{})
	createTable(t, svc, "t")
	r := req(alice, "t", "k1", incBatch(t, "k1", "ctr"))
	first := mustExecute(t, svc, r)
	wantCommitted(t, first, receipt.Bind(alice, "t", "k1"), false)
	if err := e.db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if vs := e.db.Stats().ValueLog; vs.Live == 0 {
		t.Fatalf("the terminal receipt did not move to the value log: %+v", vs)
	}
	if again := mustExecute(t, svc, r); !again.Replayed || !reflect.DeepEqual(again.Envelope, first.Envelope) {
		t.Fatalf("replay from the value log: %+v; want the first envelope %+v", again.Envelope, first.Envelope)
	}
	svc.Close()
	e.crash()
	svc = e.open(receipt.Options{})
	defer svc.Close()
	if again := mustExecute(t, svc, r); !again.Replayed || !reflect.DeepEqual(again.Envelope, first.Envelope) {
		t.Fatalf("replay after a crash: %+v", again.Envelope)
	}

	e.flipValueLogByte(t, 2) // inside the envelope's record
	if _, err := svc.Execute(context.Background(), r); !errors.Is(err, store.ErrCorruption) {
		t.Fatalf("retry over a damaged envelope: %v, want store.ErrCorruption", err)
	}
	if got := counter(t, svc, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d: the damaged receipt was taken for an absent one and ran again", got)
	}
}

// flipValueLogByte flips the byte back bytes before the end of the first
// value-log segment, on the disk under the open store.
func (e *env) flipValueLogByte(t *testing.T, back int64) {
	t.Helper()
	f, err := e.disk.FS().OpenFile("/data/vlog/0000000001.vlog", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, fi.Size()-back); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.Seek(fi.Size()-back, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}
