package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal"
)

// Variant is the deployment a scenario runs.
type Variant int

const (
	// Standalone: one node on its own engine; a crash drops unsynced bytes
	// and restarts the process (a new incarnation). With Config.Store: one
	// node on that store, whose crash restarts the node only.
	Standalone Variant = iota
	// Shared: two or three nodes in one process over one store.Store, each
	// with its own owner ID — the cluster-shared store of docs/design.md §14.
	// With Config.Store, that store: the nodes are simulated processes of a
	// cluster on it (etcd's, say).
	Shared
)

func (v Variant) String() string {
	if v == Shared {
		return "shared"
	}
	return "standalone"
}

// logLevel of the system under test (raise to Info when debugging a seed).
var logLevel = slog.LevelInfo

// node is one owner: an incarnation of a receipt.Service over its own view
// of the store.
type node struct {
	id    string
	store *nodeStore
	svc   *receipt.Service
	up    bool
	// stop ends the incarnation's maintainer.
	stop chan struct{}
}

// cluster is the system under test. Its engine lives on a crashable
// in-memory disk: a crash keeps exactly what was fsynced. Or its store is
// an external one (Config.Store, through a bridge): then there is no engine
// and no disk, and a store crash crashes the nodes only. Every node's
// store calls and timers go through the scenario's scheduler (sim).
type cluster struct {
	disk    *memfs.Disk // nil with an external store
	sim     *sim
	opts    receipt.Options
	chained bool // nodes see a store that can chain (see Config.Chained)
	// The maintenance loop the harness runs for every node (maintainer):
	// its interval, and its first pass's at most (<= 0: a whole interval).
	maintainEvery, maintainFirst time.Duration
	audit                        *auditor
	rng                          *rand.Rand
	log                          *slog.Logger

	// store is what the nodes share and the harness reads: db, or the
	// external store's bridge.
	store store.Store
	db    *engine.DB // nil with an external store
	opens int        // engine opens so far
	nodes []*node
}

// newCluster makes the cluster over external (nil: an engine of its own).
func newCluster(s *sim, external store.Store, nodes int, opts receipt.Options, chained bool, seed uint64, logw io.Writer) (*cluster, error) {
	c := &cluster{
		sim:           s,
		chained:       chained,
		opts:          opts,
		maintainEvery: opts.MaintainInterval,
		maintainFirst: time.Second, // receipt's default FirstPassMax
		rng:           rand.New(rand.NewPCG(seed, 0xc1)),
		log:           slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: logLevel})),
	}
	if c.maintainEvery == 0 {
		c.maintainEvery = opts.LeaseTTL / 2 // receipt's default
	}
	if opts.FirstPassMax < 0 {
		c.maintainFirst = 0
	}
	c.opts.MaintainInterval = -1 // the harness runs the loop: maintainer
	if external != nil {
		if chained && external.Capabilities().Chain == nil {
			return nil, fmt.Errorf("Config.Chained: the external store %T does not chain writes", external)
		}
		c.store, c.audit = external, newAuditor(external)
	} else {
		c.disk = memfs.NewDisk()
		if err := c.openStore(); err != nil {
			return nil, err
		}
	}
	for i := 0; i < nodes; i++ {
		c.nodes = append(c.nodes, &node{id: fmt.Sprintf("node-%d", i)})
	}
	return c, nil
}

func (c *cluster) openStore() error {
	// Terminal envelopes and tombstones go to the value log, in segments
	// small enough that the collector runs within a seed.
	db, err := engine.Open(dataDir, engine.Options{Logger: c.log, CheckpointLogBytes: 256 << 10,
		WAL: wal.Options{SegmentBytes: 64 << 10}, FS: c.disk.FS(),
		ColdValue: receipt.ColdValue, ValueLogSegmentBytes: 32 << 10})
	if err != nil {
		return err
	}
	c.db, c.store, c.opens = db, db, c.opens+1
	if c.audit == nil {
		c.audit = newAuditor(db)
	} else {
		c.audit.store = db
	}
	return nil
}

// startNode opens a new incarnation of node i (its store calls go through
// the scheduler: call it from an actor, see scenario.perform).
func (c *cluster) startNode(ctx context.Context, i int) error {
	n := c.nodes[i]
	opts := c.opts
	opts.Node, opts.Clock, opts.Logger = n.id, nodeClock{c.sim, n.id}, c.log
	n.store = newNodeStore(c.store, c.sim, c.audit, n.id, c.rng.Uint64())
	var st store.Store = n.store
	if c.chained {
		st = chainStore{n.store}
	}
	svc, err := receipt.Open(ctx, st, opts)
	if err != nil {
		n.store.kill()
		return fmt.Errorf("start %s: %w", n.id, err)
	}
	n.store.setOwner(svc.Owner())
	n.svc, n.up = svc, true
	n.stop = make(chan struct{})
	go c.maintainer(n, svc, n.stop)
	return nil
}

// maintainer is node n's maintenance loop — receipt's own
// (Service.startLoop), run by the harness on the node's clock so that its
// timer carries the node's label: a pass every maintainEvery, the first
// after maintainFirst at most, until the incarnation stops. Passes run
// beside the node's session calls, as they do in a server: the receipt
// layer's stripe locks are channels, so a call waiting for a stripe a pass
// holds is durably blocked and the bubble settles.
func (c *cluster) maintainer(n *node, svc *receipt.Service, stop chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	clock := nodeClock{c.sim, n.id}
	wait := c.maintainEvery
	if c.maintainFirst > 0 {
		wait = min(wait, c.maintainFirst)
	}
	for {
		select {
		case <-stop:
			return
		case <-clock.After(wait):
		}
		wait = c.maintainEvery
		if _, err := svc.MaintainOnce(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("harness: maintenance pass failed", "node", n.id, "err", err)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// crashNode stops node i as a process crash would: nothing it does from now
// on reaches the store.
func (c *cluster) crashNode(i int) {
	n := c.nodes[i]
	if !n.up {
		return
	}
	n.store.kill()
	n.svc.Close()
	close(n.stop)
	n.up = false
}

// dataDir is where the engine lives on the cluster's disk.
const dataDir = "/data"

// crashStore crashes every node and the engine — a power loss: what was
// not fsynced is gone, or torn as tear says (nil: as pickTear draws) —
// then lets damage, if set, change the disk before the engine reopens.
// Nodes are restarted by the caller.
func (c *cluster) crashStore(tear memfs.Tear, damage func(fs *memfs.FS)) error {
	for i := range c.nodes {
		c.crashNode(i)
	}
	if c.db == nil {
		return nil // an external store is replicated and outlives its clients
	}
	if tear == nil {
		tear = c.pickTear()
	}
	c.disk.Crash(c.db, tear)
	if damage != nil {
		damage(c.disk.FS())
	}
	return c.openStore()
}

// pickTear chooses what survives of bytes written after each file's last
// fsync: nothing, a random prefix (a torn write), or a prefix followed by
// zero-filled blocks.
func (c *cluster) pickTear() memfs.Tear {
	r := c.rng.Float64()
	switch c.rng.IntN(3) {
	case 0:
		return memfs.DropUnsynced
	case 1:
		return func(_ string, _ int64, b []byte) []byte { return b[:int(r*float64(len(b)))] }
	default:
		return func(name string, off int64, b []byte) []byte {
			return memfs.ZeroFill(int(r*float64(len(b))), 4096)(name, off, b)
		}
	}
}

// restartDown restarts every node that is down.
func (c *cluster) restartDown(ctx context.Context) error {
	for i, n := range c.nodes {
		if !n.up {
			if err := c.startNode(ctx, i); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *cluster) live() []int {
	var out []int
	for i, n := range c.nodes {
		if n.up {
			out = append(out, i)
		}
	}
	return out
}

func (c *cluster) close() {
	for i := range c.nodes {
		c.crashNode(i)
	}
	if c.db != nil {
		c.db.Close()
	}
}

// health is the engine's (engine.DB.Health); an external store's is not
// the harness's to judge: nil.
func (c *cluster) health() error {
	if c.db == nil {
		return nil
	}
	return c.db.Health()
}
