package etcdstore

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idemdb/idem/store"
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
// a fail-stop (nothing written, writes refused) marked store.ErrNoSpace,
// so that the layers above answer store_full and need no restart; an
// authentication refusal is not.
func TestApplyError_NoSpaceIsNotAFailStopForGood(t *testing.T) {
	err := applyError(rpctypes.ErrGRPCNoSpace)
	if !errors.Is(err, store.ErrFailStopped) || !errors.Is(err, store.ErrNoSpace) || !errors.Is(err, ErrRejected) {
		t.Fatalf("NOSPACE: %v", err)
	}
	if err := applyError(rpctypes.ErrGRPCPermissionDenied); errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("permission denied marked no space: %v", err)
	}
}

// TestSpace_OptionsTakeDefaultsAndRefuseOutOfRange: a zero option takes
// its default and a set one stays; a high-water share of exactly 1 is in
// (0, 1].
func TestSpace_OptionsTakeDefaultsAndRefuseOutOfRange(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	sp := newTestSpace(t, fakeStatus{}, SpaceOptions{}, clk)
	if sp.o.HighWater != DefaultHighWater || sp.o.Interval != DefaultSpaceInterval || sp.o.CallTimeout != DefaultCallTimeout {
		t.Fatalf("zero options: %+v, want the defaults", sp.o)
	}
	set := SpaceOptions{QuotaBytes: 1, HighWater: 1, Interval: 3 * time.Second, CallTimeout: 2 * time.Second}
	if sp = newTestSpace(t, fakeStatus{}, set, clk); sp.o != set {
		t.Fatalf("options %+v became %+v", set, sp.o)
	}
	for _, o := range []SpaceOptions{{QuotaBytes: -1}, {Interval: -1}, {CallTimeout: -1}} {
		if _, err := newSpace(fakeStatus{}, nil, o, clk.now); err == nil {
			t.Fatalf("options %+v accepted", o)
		}
	}
}

// TestSpace_GrowthIsTheSmoothedRateOfBytesInUse: the growth rate is an
// exponential average of the bytes in use per second, the old rate
// weighing half after spaceRateHalfLife; two checks at one instant leave it
// as it was; the time to full is what the quota leaves over that rate, and
// never (not NaN) with no growth, even at the quota.
func TestSpace_GrowthIsTheSmoothedRateOfBytesInUse(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	f := fakeStatus{"a": {DbSizeInUse: 100}}
	sp := newTestSpace(t, f, SpaceOptions{QuotaBytes: 1000}, clk)
	half := spaceRateHalfLife
	for i, c := range []struct {
		after         time.Duration
		inUse         int64
		growth, toFul float64
	}{
		{0, 100, 0, math.Inf(1)},
		{half, 700, 5, 60},          // 10 B/s for a half-life: half of it
		{half, 700, 2.5, 120},       // no growth for a half-life: halved
		{0, 800, 2.5, 80},           // at the same instant: no rate to average
		{2 * half, 800, 0.625, 320}, // a quarter left after two half-lives
	} {
		clk.t = clk.t.Add(c.after)
		f["a"].DbSizeInUse = c.inUse
		if err := sp.Check(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := sp.Stats()
		if math.Abs(st.GrowthBytesPerSecond-c.growth) > 1e-9 || !(st.SecondsToFull == c.toFul || math.Abs(st.SecondsToFull-c.toFul) < 1e-6) {
			t.Fatalf("check %d (%d in use of 1000): growth %v B/s, %v s to full; want %v, %v", i, c.inUse, st.GrowthBytesPerSecond, st.SecondsToFull, c.growth, c.toFul)
		}
		if st.Checks != uint64(i+1) {
			t.Fatalf("check %d counted as %d", i+1, st.Checks)
		}
	}
	atQuota := newTestSpace(t, fakeStatus{"a": {DbSizeInUse: 1000}}, SpaceOptions{QuotaBytes: 1000}, clk)
	if _ = atQuota.Check(context.Background()); !math.IsInf(atQuota.Stats().SecondsToFull, 1) {
		t.Fatalf("no growth at the quota: %v s to full, want never", atQuota.Stats().SecondsToFull)
	}
}
