package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Space watches the cluster's backend against its quota, so that new work
// is refused (receipt: store_full) before etcd's NOSPACE alarm refuses
// every write — the decisions of receipts already begun, session commits
// and cleanup included. Past the alarm a cluster needs an operator; below
// the high-water mark, what was started finishes and cleanup and
// compaction bring the size back down by themselves.
const (
	// DefaultQuotaBytes is etcd's own --quota-backend-bytes default, the
	// quota assumed when the server does not report its own.
	DefaultQuotaBytes = 2 << 30
	// DefaultHighWater is the share of the quota above which new work is
	// refused: the last 20 % is left to what is in flight, to the
	// tombstones cleanup writes, and to the time a check takes to notice.
	DefaultHighWater = 0.8
	// DefaultSpaceInterval is how often the members are asked their size:
	// one Status call per member, cheap, and frequent enough that a burst
	// of writes cannot fill the last 20 % between two checks.
	DefaultSpaceInterval = time.Second
	// spaceRateHalfLife smooths the growth rate that time-to-full is
	// computed from: a minute of history, so that one cleaner pass does
	// not swing the forecast from hours to never.
	spaceRateHalfLife = time.Minute
	// noSpaceAlarm is how a member's Status names the NOSPACE alarm among
	// its errors (etcd renders the AlarmMember: "memberID:… alarm:NOSPACE").
	noSpaceAlarm = "NOSPACE"
)

// SpaceOptions configure a Space.
type SpaceOptions struct {
	// QuotaBytes overrides the quota; 0 takes what the members report
	// (etcd 3.6 and later), else DefaultQuotaBytes.
	QuotaBytes int64
	// HighWater is the share of the quota (0, 1] above which Full reports
	// true; 0 takes DefaultHighWater.
	HighWater float64
	// Interval is how often Run checks; 0 takes DefaultSpaceInterval.
	Interval time.Duration
	// CallTimeout bounds one Status call; 0 takes DefaultCallTimeout.
	CallTimeout time.Duration
}

// SpaceStats is what the last check saw: the largest member's backend
// (each member's quota is its own; the first to reach it raises the alarm
// for the cluster).
type SpaceStats struct {
	SizeBytes      int64 // the backend file's size: what etcd's quota is checked against
	InUseBytes     int64 // of it, pages in use; the rest is reused before the file grows
	QuotaBytes     int64
	HighWaterBytes int64
	// GrowthBytesPerSecond is the smoothed rate of InUseBytes; negative
	// while cleanup frees more than is written.
	GrowthBytesPerSecond float64
	// SecondsToFull is how long, at that rate, until InUseBytes reaches
	// the quota; +Inf when it is not growing.
	SecondsToFull float64
	Alarm         bool // a member raised the NOSPACE alarm
	Full          bool // above the high-water mark, or Alarm
	Checks        uint64
	Failures      uint64 // checks no member answered
}

// statusClient is the part of clientv3.Maintenance a Space uses.
type statusClient interface {
	Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error)
}

// Space is the watcher; Full is safe to call from any goroutine.
type Space struct {
	status    statusClient
	endpoints func() []string
	o         SpaceOptions
	now       func() time.Time
	full      atomic.Bool

	mu        sync.Mutex
	stats     SpaceStats
	lastInUse int64
	lastAt    time.Time
}

// NewSpace returns a Space on cli's members.
func NewSpace(cli *clientv3.Client, o SpaceOptions) (*Space, error) {
	if cli == nil {
		return nil, errors.New("etcdstore: nil client")
	}
	return newSpace(cli.Maintenance, cli.Endpoints, o, time.Now)
}

func newSpace(sc statusClient, endpoints func() []string, o SpaceOptions, now func() time.Time) (*Space, error) {
	if o.HighWater == 0 {
		o.HighWater = DefaultHighWater
	}
	if o.Interval == 0 {
		o.Interval = DefaultSpaceInterval
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.QuotaBytes < 0 || !(o.HighWater > 0 && o.HighWater <= 1) || o.Interval < 0 || o.CallTimeout < 0 {
		return nil, fmt.Errorf("etcdstore: invalid space options %+v", o)
	}
	return &Space{status: sc, endpoints: endpoints, o: o, now: now,
		stats: SpaceStats{SecondsToFull: math.Inf(1)}}, nil
}

// Full reports whether new work should be refused: the last check found
// a member above the high-water mark, or the NOSPACE alarm raised.
func (sp *Space) Full() bool { return sp.full.Load() }

// Stats returns what the last check saw.
func (sp *Space) Stats() SpaceStats {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.stats
}

// Run checks every Interval until ctx ends.
func (sp *Space) Run(ctx context.Context) {
	t := time.NewTicker(sp.o.Interval)
	defer t.Stop()
	for {
		_ = sp.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check asks every member its size once. A member that does not answer
// is skipped; if none does, the last verdict stands (a cluster that
// cannot be reached refuses writes by itself) and the error says why.
func (sp *Space) Check(ctx context.Context) error {
	var (
		seen              int
		size, inUse, quot int64
		alarm             bool
		errs              []error
	)
	for _, ep := range sp.endpoints() {
		cctx, cancel := context.WithTimeout(ctx, sp.o.CallTimeout)
		resp, err := sp.status.Status(cctx, ep)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
			continue
		}
		seen++
		size, inUse, quot = max(size, resp.DbSize), max(inUse, resp.DbSizeInUse), max(quot, resp.DbSizeQuota)
		for _, e := range resp.Errors {
			alarm = alarm || strings.Contains(e, noSpaceAlarm)
		}
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.stats.Checks++
	if seen == 0 {
		sp.stats.Failures++
		return fmt.Errorf("etcdstore: space: no member answered: %w", errors.Join(errs...))
	}
	sp.record(size, inUse, sp.quota(quot), alarm)
	return nil
}

// quota is the quota in force: the option, else the members', else etcd's
// default.
func (sp *Space) quota(reported int64) int64 {
	switch {
	case sp.o.QuotaBytes > 0:
		return sp.o.QuotaBytes
	case reported > 0:
		return reported
	}
	return DefaultQuotaBytes
}

// record sets the stats and the verdict from one check; sp.mu is held.
func (sp *Space) record(size, inUse, quota int64, alarm bool) {
	now := sp.now()
	st := &sp.stats
	if !sp.lastAt.IsZero() {
		if dt := now.Sub(sp.lastAt).Seconds(); dt > 0 {
			rate := float64(inUse-sp.lastInUse) / dt
			w := math.Exp2(-dt / spaceRateHalfLife.Seconds()) // the old rate's weight
			st.GrowthBytesPerSecond = w*st.GrowthBytesPerSecond + (1-w)*rate
		}
	}
	sp.lastInUse, sp.lastAt = inUse, now
	st.SizeBytes, st.InUseBytes, st.QuotaBytes, st.Alarm = size, inUse, quota, alarm
	st.HighWaterBytes = int64(sp.o.HighWater * float64(quota))
	st.SecondsToFull = math.Inf(1)
	if st.GrowthBytesPerSecond > 0 {
		st.SecondsToFull = max(float64(quota-inUse), 0) / st.GrowthBytesPerSecond
	}
	// In use, not the file's size: after compaction the file keeps its
	// size but its free pages are written first, so only what is in use
	// says how close the next growth is.
	st.Full = alarm || inUse >= st.HighWaterBytes
	sp.full.Store(st.Full)
}
