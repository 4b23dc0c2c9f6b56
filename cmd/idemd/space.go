package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	etcdstore "github.com/idemdb/idem/store/etcd"
)

// watchSpace checks the cluster's space once — so that a node started on
// a full cluster refuses new work from its first request — then runs the
// watcher until the returned stop, logging each change of the verdict.
func watchSpace(sp *etcdstore.Space, every time.Duration, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	if err := sp.Check(ctx); err != nil {
		log.Warn("idemd: etcd space: first check failed", "err", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { sp.Run(ctx) })
	wg.Go(func() { logSpaceChanges(ctx, sp, log, every) })
	return func() { cancel(); wg.Wait() }
}

// logSpaceChanges logs when the store becomes full and when it has room
// again, at the watcher's own pace.
func logSpaceChanges(ctx context.Context, sp *etcdstore.Space, log *slog.Logger, every time.Duration) {
	full := false
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if st := sp.Stats(); st.Full != full {
			full = st.Full
			if full {
				log.Warn("idemd: etcd is near its space quota: new keys and sessions are answered 503 store_full until cleanup and compaction free space (docs/cluster.md)",
					"in_use_bytes", st.InUseBytes, "size_bytes", st.SizeBytes, "high_water_bytes", st.HighWaterBytes, "quota_bytes", st.QuotaBytes, "nospace_alarm", st.Alarm)
			} else {
				log.Info("idemd: etcd has room again: new keys and sessions are served", "in_use_bytes", st.InUseBytes, "high_water_bytes", st.HighWaterBytes)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// spaceCollectors are the watcher's gauges, read at scrape time, with
// labels (a shard's name on a sharded deployment, else none).
func spaceCollectors(sp *etcdstore.Space, labels prometheus.Labels) []prometheus.Collector {
	gauge := func(name, help string, f func(etcdstore.SpaceStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return f(sp.Stats()) })
	}
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	return []prometheus.Collector{
		gauge("idem_etcd_backend_bytes", "etcd's backend file size, the largest member's: what etcd's quota is checked against.",
			func(s etcdstore.SpaceStats) float64 { return float64(s.SizeBytes) }),
		gauge("idem_etcd_backend_in_use_bytes", "Of it, bytes in use (the rest is free pages, written first): what the high-water mark is compared with.",
			func(s etcdstore.SpaceStats) float64 { return float64(s.InUseBytes) }),
		gauge("idem_etcd_quota_bytes", "etcd's backend quota (-etcd-quota-bytes, or the members' --quota-backend-bytes).",
			func(s etcdstore.SpaceStats) float64 { return float64(s.QuotaBytes) }),
		gauge("idem_etcd_high_water_bytes", "In-use bytes above which new keys and sessions are answered 503 store_full (-etcd-high-water of the quota).",
			func(s etcdstore.SpaceStats) float64 { return float64(s.HighWaterBytes) }),
		gauge("idem_etcd_seconds_to_full", "Seconds until the in-use bytes reach the quota at the current (smoothed) growth rate; +Inf while not growing.",
			func(s etcdstore.SpaceStats) float64 { return s.SecondsToFull }),
		gauge("idem_etcd_store_full", "1 while new keys and sessions are refused store_full (above the high-water mark, or the NOSPACE alarm raised).",
			func(s etcdstore.SpaceStats) float64 { return flag(s.Full) }),
		gauge("idem_etcd_nospace_alarm", "1 while a member has raised etcd's NOSPACE alarm: an operator must defragment and disarm it (docs/cluster.md).",
			func(s etcdstore.SpaceStats) float64 { return flag(s.Alarm) }),
	}
}
