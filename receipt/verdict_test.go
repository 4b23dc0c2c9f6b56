package receipt

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

func failedOn(key []byte) error {
	return &store.ConditionError{Cond: store.Condition{Key: key, Kind: store.MustBeAtVersion, Version: 3}, Found: 4}
}

func TestClassifyWrite_EveryErrorHasOneVerdict(t *testing.T) {
	claim, job := lease.ClaimKey("r1"), lease.JobKey(cleanerJob)
	other := receiptKey("r1")
	readErr := errors.New("test: transient read error")
	for _, tc := range []struct {
		design string
		err    error
		fence  []byte
		want   writeVerdict
	}{
		{"§2 Apply returned nil: durable", nil, claim, writeDone},
		{"§7 a failed condition on our claim: fenced", failedOn(claim), claim, writeFenced},
		{"§7 cleanup is fenced too: a failed condition on the job key", failedOn(job), job, writeFenced},
		{"§7 a lost claim refuses to fence (lease.ErrFenced)", fmt.Errorf("fence: %w", lease.ErrFenced), claim, writeFenced},
		{"§5.3 a write that publishes a claim cannot be fenced: its failed claim condition is a lost race", failedOn(claim), nil, writeRetry},
		{"§2 ErrConditionFailed: nothing was written, look again", failedOn(other), claim, writeRetry},
		{"§6 DecisionConflict is not proof of abort: look again", twopc.ErrDecisionConflict, claim, writeRetry},
		{"§6 begun twice never resets: the transaction exists, look again", twopc.ErrInProgress, nil, writeRetry},
		{"§2 ErrAmbiguous is pending, never failure", fmt.Errorf("%w: fsync failed", store.ErrAmbiguous), claim, writeAmbiguous},
		{"§6 an unreadable winner leaves the outcome unknown", fmt.Errorf("%w: %w", twopc.ErrOutcomeUnknown, readErr), claim, writeAmbiguous},
		{"§2 an ambiguous chain is unknown", fmt.Errorf("%w: %w", twopc.ErrOutcomeUnknown, store.ErrAmbiguous), nil, writeAmbiguous},
		{"§7 uncertain ownership is not loss: pending", lease.ErrUncertain, claim, writeAmbiguous},
		{"§3 an ambiguous write that fail-stopped the log is still ambiguous",
			fmt.Errorf("%w: %w", store.ErrAmbiguous, store.ErrFailStopped), claim, writeAmbiguous},
		{"§3 a fail-stopped store refused the write", fmt.Errorf("%w: eio", store.ErrFailStopped), claim, writeRefused},
		{"§3 a closed store refused the write", store.ErrClosed, claim, writeRefused},
		{"§9 a failpoint stands for an I/O error: failed", &fault.Injected{Name: fault.ReceiptTerminalBefore, Value: "eio"}, claim, writeFailed},
		{"§13 anything else: failed, returned as it is", readErr, claim, writeFailed},
		{"§5.3 the receipt changed under the step: look again", errRetry, claim, writeRetry},
	} {
		if got := classifyWrite(tc.err, tc.fence); got != tc.want {
			t.Errorf("%s: classifyWrite(%v) = %v, want %v", tc.design, tc.err, got, tc.want)
		}
	}
}

// TestClassifyStep_OnlyErrorsAboutTheReceiptCount: a step that is not a
// receipt write (a read, a lease check, a resolution) fails on its own
// failed conditions and 2PC errors; it is pending, fenced or retried only
// for what speaks about the receipt.
func TestClassifyStep_OnlyErrorsAboutTheReceiptCount(t *testing.T) {
	for _, tc := range []struct {
		design string
		err    error
		want   writeVerdict
	}{
		{"§5.3 the receipt changed (errRetry): look again", errRetry, writeRetry},
		{"§7 the lease was lost", lease.ErrFenced, writeFenced},
		{"§7 the lease could not be confirmed: pending", lease.ErrUncertain, writeAmbiguous},
		{"§2 an ambiguous write inside the step: pending", store.ErrAmbiguous, writeAmbiguous},
		{"§3 the store refuses writes", store.ErrFailStopped, writeRefused},
		{"§13 a condition inside the step is its own failure", failedOn(receiptKey("r1")), writeFailed},
		{"§13 an undecided transaction found by a resolution is its failure", twopc.ErrInProgress, writeFailed},
		{"§13 a decision it cannot read is its failure", fmt.Errorf("%w: x", twopc.ErrOutcomeUnknown), writeFailed},
	} {
		if got := classifyStep(tc.err); got != tc.want {
			t.Errorf("%s: classifyStep(%v) = %v, want %v", tc.design, tc.err, got, tc.want)
		}
	}
}

// TestSettle_VerdictBringsTheHoldInLine: what each verdict does to the
// hold of the write in flight, by what the write does to the claim.
func TestSettle_VerdictBringsTheHoldInLine(t *testing.T) {
	until := dt0.Add(time.Minute)
	for _, tc := range []struct {
		design     string
		claim      claimWrite
		v          writeVerdict
		wantStatus lease.Status
		wantActive bool
		wantVer    store.Version
		wantUntil  time.Time
	}{
		{"§7 a published claim is confirmed at the write's version", claimPublished, writeDone, lease.Live, true, 9, until},
		{"§2 an ambiguous publication must be read back", claimPublished, writeAmbiguous, lease.Unconfirmed, true, 0, until},
		{"§7 a publication that lost its race leaves the active set", claimPublished, writeRetry, lease.Publishing, false, 0, until},
		{"§7 a publication that failed leaves the active set", claimPublished, writeFailed, lease.Publishing, false, 0, until},
		{"§3 a publication the store refused leaves the active set", claimPublished, writeRefused, lease.Publishing, false, 0, until},
		{"§7 a started write extends the lease", claimExtended, writeDone, lease.Live, true, 1, until},
		{"§7 a fenced owner write marks the lease lost", claimKept, writeFenced, lease.Lost, true, 1, dt0},
		{"§7 a fenced extension marks the lease lost", claimExtended, writeFenced, lease.Lost, true, 1, dt0},
		{"§2 an ambiguous owner write keeps the lease", claimKept, writeAmbiguous, lease.Live, true, 1, dt0},
		{"§7 a done owner write leaves the lease to the supervisor", claimKept, writeDone, lease.Live, true, 1, dt0},
	} {
		s := &flow{core: &core{active: lease.NewActiveSet()}}
		a := &attempt{id: "r1", claim: tc.claim, until: until}
		if tc.claim == claimPublished {
			a.held = lease.ClaimNew(new(store.Batch), a.id, me, until)
		} else {
			a.held = lease.Resume(a.id, lease.State{Claim: lease.Claim{Node: me.Node, Incarnation: me.Incarnation, Epoch: 1},
				ClaimVersion: 1, Expires: dt0})
		}
		s.core.active.Add(a.held)
		s.settle(a, tc.v, 9)
		_, ver, gotUntil, status := a.held.Snapshot()
		_, active := s.core.active.Get(a.id)
		if status != tc.wantStatus || active != tc.wantActive || ver != tc.wantVer || !gotUntil.Equal(tc.wantUntil) {
			t.Errorf("%s: status %v active %v version %d until %v; want %v %v %d %v", tc.design,
				status, active, ver, gotUntil, tc.wantStatus, tc.wantActive, tc.wantVer, tc.wantUntil)
		}
	}
}

// TestStuck_VerdictDecidesTheAnswer: a receipt a step could not advance
// keeps its state, and the answer says so by the verdict.
func TestStuck_VerdictDecidesTheAnswer(t *testing.T) {
	failure := errors.New("test: failure")
	for _, tc := range []struct {
		design   string
		ver      store.Version // 0: being created
		v        writeVerdict
		wantCode code.Code
		wantMsg  string
		wantSt   State
		wantErr  error
	}{
		{"§5.3 a lost race: look the receipt up again", 5, writeRetry, "", "", 0, errRetry},
		{"§5.3 fenced: another owner has it: in progress", 5, writeFenced, code.RequestInProgress, "", Started, nil},
		{"§5.7 unknown outcome: pending, receipt stays started", 5, writeAmbiguous, code.ReceiptPending, msgOutcomeUnknown, Started, nil},
		{"§5.4 ambiguous publication: pending, no state known", 0, writeAmbiguous, code.ReceiptPending, msgPublishUnknown, 0, nil},
		{"§13 a failure is returned as it is", 5, writeFailed, "", "", 0, failure},
		{"§3 a refused write is returned as it is (the caller answers unavailable)", 5, writeRefused, "", "", 0, failure},
	} {
		s := &flow{core: &core{opts: Options{LeaseTTL: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)}}}
		a := &attempt{id: "r1", rec: &Record{State: Started}, ver: tc.ver}
		ans, err := s.stuck(a, tc.v, failure)
		switch {
		case !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil):
			t.Errorf("%s: error %v, want %v", tc.design, err, tc.wantErr)
		case ans.Code != tc.wantCode || ans.State != tc.wantSt || (tc.wantMsg != "" && ans.Message != tc.wantMsg):
			t.Errorf("%s: answer %+v, want %s %v %q", tc.design, ans, tc.wantCode, tc.wantSt, tc.wantMsg)
		case ans.Code != "" && (ans.Terminal || !ans.Retryable || ans.RetryAfter <= 0 || ans.TxnID != "r1"):
			t.Errorf("%s: answer %+v must be retryable with the same key", tc.design, ans)
		}
		if fenced := s.core.stats.fenced.Load(); (tc.v == writeFenced) != (fenced == 1) {
			t.Errorf("%s: fenced counted %d", tc.design, fenced)
		}
	}
}
