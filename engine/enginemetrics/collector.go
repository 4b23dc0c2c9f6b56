// Package enginemetrics exports engine.DB's statistics (WAL, fsyncs,
// group commits, checkpoints, recovery, fail-stop) as Prometheus metrics.
// It lives beside the engine, not in the API, so that the HTTP layer knows
// nothing of one store's internals: a server on another Store passes that
// store's collector instead.
package enginemetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/wal"
)

// New returns the collector of stats (an engine.DB's Stats), read once per
// scrape.
func New(stats func() engine.Stats) prometheus.Collector { return newEngineCollector(stats) }

// engineCollector exports engine.Stats, read once per scrape: one reading
// costs a lock of the tree and copies of three histograms, and every
// engine metric of a scrape then comes from the same instant.
type engineCollector struct {
	stats      func() engine.Stats
	scalars    []engineScalar
	histograms []engineHistogram
}

type engineScalar struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(engine.Stats) float64
}

type engineHistogram struct {
	desc *prometheus.Desc
	// per is how many of the snapshot's units make one of the metric's:
	// nanosPerSecond for the duration histograms. (Dividing keeps bounds
	// such as 30 s exact, where multiplying by 1e-9 would not.)
	per      float64
	snapshot func(engine.Stats) wal.HistogramSnapshot
}

// nanosPerSecond converts the duration histograms' nanoseconds to seconds.
const nanosPerSecond = 1e9

func newEngineCollector(stats func() engine.Stats) *engineCollector {
	c := &engineCollector{stats: stats}
	scalar := func(kind prometheus.ValueType, name, help string, f func(engine.Stats) float64) {
		c.scalars = append(c.scalars, engineScalar{prometheus.NewDesc(name, help, nil, nil), kind, f})
	}
	counter := func(name, help string, f func(engine.Stats) uint64) {
		scalar(prometheus.CounterValue, name, help, func(s engine.Stats) float64 { return float64(f(s)) })
	}
	gauge := func(name, help string, f func(engine.Stats) float64) { scalar(prometheus.GaugeValue, name, help, f) }
	histogram := func(name, help string, per float64, f func(engine.Stats) wal.HistogramSnapshot) {
		c.histograms = append(c.histograms, engineHistogram{prometheus.NewDesc(name, help, nil, nil), per, f})
	}
	counter("idem_wal_fsyncs_total", "fsync calls of the WAL (segments and directory).", func(s engine.Stats) uint64 { return s.WAL.Fsyncs })
	counter("idem_wal_groups_total", "WAL group commits.", func(s engine.Stats) uint64 { return s.WAL.Groups })
	counter("idem_wal_entries_total", "WAL entries (engine batches); entries/groups is the mean group size.", func(s engine.Stats) uint64 { return s.WAL.Entries })
	counter("idem_wal_bytes_total", "WAL frame bytes written.", func(s engine.Stats) uint64 { return s.WAL.Bytes })
	histogram("idem_wal_fsync_duration_seconds", "Latency of each WAL fsync (segments, tidwall's own included, and directory), failed ones included.",
		nanosPerSecond, func(s engine.Stats) wal.HistogramSnapshot { return s.WAL.FsyncDuration })
	histogram("idem_wal_group_entries", "Entries per WAL group commit.",
		1, func(s engine.Stats) wal.HistogramSnapshot { return s.WAL.GroupEntries })
	counter("idem_checkpoints_total", "Checkpoints completed.", func(s engine.Stats) uint64 { return s.Checkpoints.Completed })
	counter("idem_checkpoint_deltas_total", "Checkpoints completed as deltas: what changed since the chain's newest link, not the whole store.", func(s engine.Stats) uint64 { return s.Checkpoints.Deltas })
	counter("idem_checkpoint_failures_total", "Checkpoint attempts that failed, in writing or in truncating the log after (automatic ones are retried with backoff).", func(s engine.Stats) uint64 { return s.Checkpoints.Failed })
	counter("idem_checkpoint_bytes_total", "Checkpoint bytes made durable.", func(s engine.Stats) uint64 { return s.Checkpoints.BytesWritten })
	histogram("idem_checkpoint_duration_seconds", "Duration of each completed checkpoint.",
		nanosPerSecond, func(s engine.Stats) wal.HistogramSnapshot { return s.Checkpoints.Duration })
	gauge("idem_checkpoint_size_bytes", "Size of the newest complete checkpoint (written, or loaded at open).",
		func(s engine.Stats) float64 { return float64(s.Checkpoints.Bytes) })
	gauge("idem_engine_keys", "Keys in the store.", func(s engine.Stats) float64 { return float64(s.Keys) })
	gauge("idem_engine_log_since_checkpoint_entries", "Log positions after the newest checkpoint: about what a restart now would replay.",
		func(s engine.Stats) float64 { return float64(s.Applied - min(s.Checkpoint, s.Applied)) })
	gauge("idem_engine_recovery_replayed_bytes", "Log bytes the open that started this process replayed after its checkpoint.",
		func(s engine.Stats) float64 { return float64(s.Recovery.ReplayedBytes) })
	gauge("idem_vlog_segments", "Value-log segment files (terminal envelopes and tombstones moved out of RAM).",
		func(s engine.Stats) float64 { return float64(s.ValueLog.Segments) })
	gauge("idem_vlog_bytes", "Bytes of the value-log segments on disk.", func(s engine.Stats) float64 { return float64(s.ValueLog.Bytes) })
	gauge("idem_vlog_live_bytes", "Bytes of value-log records the store still points at; bytes - live is what the collector may reclaim.",
		func(s engine.Stats) float64 { return float64(s.ValueLog.Live) })
	counter("idem_vlog_spilled_bytes_total", "Record bytes checkpoints moved from RAM to the value log.", func(s engine.Stats) uint64 { return s.ValueLog.Spilled })
	counter("idem_vlog_relocated_bytes_total", "Record bytes the value-log collector copied out of mostly dead segments (write amplification: (spilled + relocated) / spilled).",
		func(s engine.Stats) uint64 { return s.ValueLog.Relocated })
	counter("idem_vlog_segments_collected_total", "Value-log segments the collector removed.", func(s engine.Stats) uint64 { return s.ValueLog.Collected })
	counter("idem_engine_descriptor_waits_total", "Opens (WAL, checkpoints, value log) that met EMFILE or ENFILE and waited for a file descriptor instead of failing.",
		func(s engine.Stats) uint64 { return s.DescriptorWaits + s.WAL.DescriptorWaits })
	gauge("idem_engine_fail_stopped", "1 when the engine fail-stopped after an I/O error and refuses writes until restarted, else 0.",
		func(s engine.Stats) float64 {
			if s.FailStopped {
				return 1
			}
			return 0
		})
	return c
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range c.scalars {
		ch <- s.desc
	}
	for _, h := range c.histograms {
		ch <- h.desc
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	for _, s := range c.scalars {
		ch <- prometheus.MustNewConstMetric(s.desc, s.kind, s.value(st))
	}
	for _, h := range c.histograms {
		snap := h.snapshot(st)
		buckets := make(map[float64]uint64, len(snap.Bounds))
		for i, b := range snap.Bounds {
			buckets[float64(b)/h.per] = snap.Cumulative[i]
		}
		ch <- prometheus.MustNewConstHistogram(h.desc, snap.Count, float64(snap.Sum)/h.per, buckets)
	}
}
