package harness

import "time"

// ConfigFor derives a scenario from a seed alone, so that a seed is all a
// replay needs: odd seeds run the shared-store variant (two or three nodes),
// even ones the standalone node; every fifth seed runs a tiny executor;
// seeds ≡ 3 mod 4 keep receipts only briefly and run maintenance rarely, so
// the cleaner meets receipts whose debt outlives their first deadline;
// two seeds in three chain a new receipt's writes (Config.Chained), and of
// the others, seeds ≡ 0 mod 6 write a receipt's decision apart from its
// Begin (Config.SeparateDecide) while seeds ≡ 3 mod 6 commit it in one
// write as an unchained store (etcd) does; seeds
// ≡ 3 or 6 mod 8 defer intent resolution to maintenance, so terminal
// receipts carry visibility debt (and, ≡ 3 mod 8, meet the cleaner with it);
// seeds ≡ 0 mod 7 opt out of tombstones, the others protect a key 2, 2.5 or
// 3 × Retention after it completed (⌊seed/7⌋ mod 3), so that within a run
// receipts become tombstones, keys are refused while protected, and the
// tombstones are cleaned in turn and the keys executed again.
func ConfigFor(seed int64) Config {
	u := uint64(seed)
	c := Config{
		Seed:    seed,
		Variant: Standalone,
		Nodes:   1,
		Clients: 4,
		// Two session clients (session.go) besides the keyed ones.
		SessionClients: 2,
		Keys:           10,
		Docs:           3,
		Steps:          24,
		FaultRate:      0.6,
		ExecutorMax:    64,
		Retention:      45 * time.Second,
		Chained:        u%3 != 0,
		SeparateDecide: u%6 == 0,
	}
	if u%4 == 3 {
		c.Retention, c.MaintainInterval = 4*time.Second, 30*time.Second
	}
	if u%2 == 1 {
		c.Variant = Shared
		c.Nodes = 2 + int(u/2%2)
	}
	c.TombstoneRetention = c.Retention * time.Duration(4+u/7%3) / 2
	if u%7 == 0 {
		c.TombstoneRetention = -1
	}
	if u%5 == 0 {
		c.ExecutorMax = 1
	}
	if u%8 == 3 || u%8 == 6 {
		c.DeferResolution = true
	}
	return c
}

// Shape of the hot-document workload (issue 37): many clients, few
// documents, no sessions.
const (
	hotClients = 8
	hotDocs    = 2
)

// HotConfigFor is ConfigFor's scenario as a hot-document workload: every
// keyed batch only increments (Config.Hot), twice as many clients send
// them, and they share two counters, so that most steps have several
// batches on one document in flight at once, under the seed's faults.
// Sessions are left out: their commits are conditioned on the values they
// read, and a hot counter refuses them rightly.
func HotConfigFor(seed int64) Config {
	c := ConfigFor(seed)
	c.Hot, c.Clients, c.Docs, c.SessionClients = true, hotClients, hotDocs, 0
	return c
}
