package receipt

import (
	"time"

	"github.com/idemdb/idem/code"
)

// The restore fence (docs/design.md §15). A store restored from a backup
// lost the receipts acknowledged after the backup's version: a retry of
// such a key finds nothing and would execute the batch a second time. So a
// key the store does not know, sent with a Repeatability-First-Sent
// before the restore, is refused — it may have executed in the window the
// backup lost — and never executed. A request without the header cannot be
// told from a new one: it is executed (unprotected, docs/operations.md).
// The fence lasts Retention after the restore: a key first sent before
// then whose receipt would still be kept is one the lost window could hold.

// RestoreFence is what the service knows of its store's restore
// (engine.DB.Restored).
type RestoreFence struct {
	// BackupTime is the backup's version time: what was acknowledged
	// after it may be lost.
	BackupTime time.Time
	// RestoredAt is when the store was first opened on the backup.
	RestoredAt time.Time
}

// Restored returns the store's restore and when its fence ends; ok=false
// if the store was never restored.
func (s *Service) Restored() (f RestoreFence, until time.Time, ok bool) {
	if s.core.opts.Restore == nil {
		return RestoreFence{}, time.Time{}, false
	}
	return *s.core.opts.Restore, s.core.opts.Restore.RestoredAt.Add(s.core.opts.Retention), true
}

// fenced reports whether a new key first sent at firstSent falls under the
// restore fence at now; until is when the fence ends.
func (s *Service) fenced(firstSent, now time.Time) (until time.Time, ok bool) {
	f := s.core.opts.Restore
	if f == nil || firstSent.IsZero() {
		return time.Time{}, false
	}
	until = f.RestoredAt.Add(s.core.opts.Retention)
	return until, firstSent.Before(f.RestoredAt) && now.Before(until)
}

// answerMayHaveExecuted refuses a new key first sent before the restore.
// Nothing is written: no receipt, so a retry after the fence ends is a new
// request.
func (s *Service) answerMayHaveExecuted(txnID string, firstSent, until time.Time) Answer {
	f := s.core.opts.Restore
	return Answer{Envelope: fromCode(code.KeyMayHaveExecuted, "this store was restored at "+stamp(f.RestoredAt)+
		" from a backup taken at "+stamp(f.BackupTime)+"; this request, first sent at "+stamp(firstSent)+
		", is unknown here and may have executed between "+stamp(f.BackupTime)+" and "+stamp(f.RestoredAt)+
		" (writes the backup lost): it is not executed. Check whether its effect is there; if not, send it with a new key"+
		" (this fence ends at "+stamp(until)+")", txnID, OutcomeNotApplied)}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
