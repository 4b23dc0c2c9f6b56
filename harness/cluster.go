package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal"
)

// Variant is the deployment a scenario runs.
type Variant int

const (
	// Standalone: one node on its own engine; a crash drops unsynced bytes
	// and restarts the process (a new incarnation).
	Standalone Variant = iota
	// Shared: two or three nodes in one process over one engine.Store, each
	// with its own owner ID — the cluster-shared store of DESIGN §14.
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
}

// cluster is the system under test. Its engine lives on a crashable
// in-memory disk: a crash keeps exactly what was fsynced.
type cluster struct {
	disk    *memfs.Disk
	clock   *lease.Sim
	opts    receipt.Options
	chained bool // nodes see a store that can chain (see Config.Chained)
	obs     *observer
	rng     *rand.Rand
	log     *slog.Logger

	mu    sync.Mutex
	db    *engine.DB
	nodes []*node
}

func newCluster(nodes int, opts receipt.Options, chained bool, seed uint64, logw io.Writer) (*cluster, error) {
	c := &cluster{
		disk:    memfs.NewDisk(),
		chained: chained,
		clock:   lease.NewSim(time.Unix(1_800_000_000, 0)),
		opts:    opts,
		obs:     &observer{},
		rng:     rand.New(rand.NewPCG(seed, 0xc1)),
		log:     slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: logLevel})),
	}
	if err := c.openStore(); err != nil {
		return nil, err
	}
	for i := 0; i < nodes; i++ {
		c.nodes = append(c.nodes, &node{id: fmt.Sprintf("node-%d", i)})
		if err := c.startNode(i); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *cluster) openStore() error {
	db, err := engine.Open(dataDir, engine.Options{Logger: c.log, CheckpointLogBytes: 256 << 10,
		WAL: wal.Options{SegmentBytes: 64 << 10}, FS: c.disk.FS()})
	if err != nil {
		return err
	}
	c.db = db
	return nil
}

// startNode opens a new incarnation of node i.
func (c *cluster) startNode(i int) error {
	n := c.nodes[i]
	opts := c.opts
	opts.Node, opts.Clock, opts.Logger = n.id, c.clock, c.log
	n.store = newNodeStore(c.db, c.obs, c.rng.Uint64())
	var store engine.Store = n.store
	if c.chained {
		store = chainStore{n.store}
	}
	svc, err := receipt.Open(context.Background(), store, opts)
	if err != nil {
		return fmt.Errorf("start %s: %w", n.id, err)
	}
	n.svc, n.up = svc, true
	return nil
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
	n.up = false
}

// dataDir is where the engine lives on the cluster's disk.
const dataDir = "/data"

// crashStore crashes every node and the engine — a power loss: what was
// not fsynced is gone, or torn as pickTear says — then reopens the engine.
// Nodes are restarted by the caller.
func (c *cluster) crashStore() error {
	for i := range c.nodes {
		c.crashNode(i)
	}
	c.disk.Crash(c.db, c.pickTear())
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
func (c *cluster) restartDown() error {
	for i, n := range c.nodes {
		if !n.up {
			if err := c.startNode(i); err != nil {
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
	c.db.Close()
}
