package etcdstore

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idemdb/idem/engine"
)

// fakeStatus answers Status from a table of members; a member with no
// entry fails.
type fakeStatus map[string]*clientv3.StatusResponse

func (f fakeStatus) Status(_ context.Context, ep string) (*clientv3.StatusResponse, error) {
	if r, ok := f[ep]; ok {
		return r, nil
	}
	return nil, errors.New("unreachable")
}

// fakeClock advances by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestSpace(t *testing.T, f fakeStatus, o SpaceOptions, clk *fakeClock) *Space {
	t.Helper()
	sp, err := newSpace(f, func() []string { return []string{"a", "b", "c"} }, o, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// TestSpace_FullFollowsTheLargestMembersInUseBytesAndTheAlarm: the
// verdict is the largest member's bytes in use against the high-water
// share of the quota the members report — not the file's size, which
// compaction leaves large — or the NOSPACE alarm; it clears by itself
// once the size falls back or the alarm is disarmed.
func TestSpace_FullFollowsTheLargestMembersInUseBytesAndTheAlarm(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	f := fakeStatus{
		"a": {DbSize: 900, DbSizeInUse: 300, DbSizeQuota: 1000},
		"b": {DbSize: 500, DbSizeInUse: 500, DbSizeQuota: 1000},
	} // c does not answer
	sp := newTestSpace(t, f, SpaceOptions{}, clk)
	if err := sp.Check(context.Background()); err != nil || sp.Full() {
		t.Fatalf("500 of 1000 in use: full=%v err=%v", sp.Full(), err)
	}
	st := sp.Stats()
	if st.SizeBytes != 900 || st.InUseBytes != 500 || st.QuotaBytes != 1000 || st.HighWaterBytes != 800 || !math.IsInf(st.SecondsToFull, 1) {
		t.Fatalf("stats %+v", st)
	}
	f["b"] = &clientv3.StatusResponse{DbSize: 850, DbSizeInUse: 800, DbSizeQuota: 1000}
	clk.t = clk.t.Add(10 * time.Second)
	if _ = sp.Check(context.Background()); !sp.Full() {
		t.Fatalf("800 of 1000 in use (high water 80 %%): not full: %+v", sp.Stats())
	}
	if st := sp.Stats(); !(st.GrowthBytesPerSecond > 0) || math.IsInf(st.SecondsToFull, 1) {
		t.Fatalf("growing, yet no time to full: %+v", st)
	}
	f["b"] = &clientv3.StatusResponse{DbSize: 850, DbSizeInUse: 100, DbSizeQuota: 1000, Errors: []string{"memberID:1 alarm:NOSPACE "}}
	if _ = sp.Check(context.Background()); !sp.Full() || !sp.Stats().Alarm {
		t.Fatalf("the NOSPACE alarm raised: not full: %+v", sp.Stats())
	}
	f["b"].Errors = nil
	if _ = sp.Check(context.Background()); sp.Full() {
		t.Fatalf("alarm disarmed, 300 in use: still full: %+v", sp.Stats())
	}

	// No member answers: the verdict stands, and the error says so.
	f["b"].DbSizeInUse = 900
	if _ = sp.Check(context.Background()); !sp.Full() {
		t.Fatalf("900 of 1000 in use: not full: %+v", sp.Stats())
	}
	delete(f, "a")
	delete(f, "b")
	if err := sp.Check(context.Background()); err == nil || !sp.Full() || sp.Stats().Failures != 1 {
		t.Fatalf("no member answered: err=%v full=%v %+v", err, sp.Full(), sp.Stats())
	}
}

// TestSpace_QuotaOption: the option overrides what the members report,
// and without either etcd's default is assumed; a high-water share
// outside (0, 1] is refused.
func TestSpace_QuotaOption(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	f := fakeStatus{"a": {DbSizeInUse: 900, DbSizeQuota: 1000}}
	sp := newTestSpace(t, f, SpaceOptions{QuotaBytes: 4000, HighWater: 0.5}, clk)
	if _ = sp.Check(context.Background()); sp.Full() || sp.Stats().HighWaterBytes != 2000 {
		t.Fatalf("quota 4000 at 50 %%: %+v", sp.Stats())
	}
	f["a"].DbSizeQuota = 0
	sp = newTestSpace(t, f, SpaceOptions{}, clk)
	if _ = sp.Check(context.Background()); sp.Stats().QuotaBytes != DefaultQuotaBytes {
		t.Fatalf("no quota reported: %+v", sp.Stats())
	}
	for _, hw := range []float64{-0.1, 1.5} {
		if _, err := newSpace(f, nil, SpaceOptions{HighWater: hw}, clk.now); err == nil {
			t.Fatalf("high water %v accepted", hw)
		}
	}
}

// TestApplyError_NoSpaceIsNotAFailStopForGood: etcd's NOSPACE refusal is
// a fail-stop (nothing written, writes refused) marked engine.ErrNoSpace,
// so that the layers above answer store_full and need no restart; an
// authentication refusal is not.
func TestApplyError_NoSpaceIsNotAFailStopForGood(t *testing.T) {
	err := applyError(rpctypes.ErrGRPCNoSpace)
	if !errors.Is(err, engine.ErrFailStopped) || !errors.Is(err, engine.ErrNoSpace) || !errors.Is(err, ErrRejected) {
		t.Fatalf("NOSPACE: %v", err)
	}
	if err := applyError(rpctypes.ErrGRPCPermissionDenied); errors.Is(err, engine.ErrNoSpace) {
		t.Fatalf("permission denied marked no space: %v", err)
	}
}
