package receipt

import (
	"testing"

	"github.com/idemdb/idem/code"
)

// TestEnvelope_ASessionCommitReplaysWhatItStored: the session form of an
// aborted commit (retry_with none, retry new_session) is made where the
// answer is stored; a commit receipt stored before that rule replays its
// own answer unchanged (byte for byte), new_key and all.
func TestEnvelope_ASessionCommitReplaysWhatItStored(t *testing.T) {
	aborted := fromCode(code.TransactionConflict, "document changed", "t1", OutcomeAborted)
	rec := &Record{Schema: SchemaCurrent, Session: "s1", State: Terminal}
	rec.Envelope = storedFor(rec, aborted)
	if got := EnvelopeOf(rec, "t1"); got.RetryWith != code.None || got.Retry != RetryNewSession {
		t.Fatalf("a new session commit's stored answer: retry_with %q retry %q, want none and %q", got.RetryWith, got.Retry, RetryNewSession)
	}
	old := &Record{Schema: SchemaCurrent, Session: "s1", State: Terminal, Envelope: aborted.stored()}
	if got := EnvelopeOf(old, "t1"); got.RetryWith != code.NewKey || got.Retry != "" {
		t.Fatalf("a commit stored before the rule replays retry_with %q retry %q, want its own new_key and none", got.RetryWith, got.Retry)
	}
	batch := &Record{Schema: SchemaCurrent, State: Terminal}
	batch.Envelope = storedFor(batch, aborted)
	if got := EnvelopeOf(batch, "t1"); got.RetryWith != code.NewKey || got.Retry != "" {
		t.Fatalf("a keyed batch's abort: retry_with %q retry %q, want new_key and none", got.RetryWith, got.Retry)
	}
}
