package etcdtest_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/testsupport"
)

// Process-level chaos on a cluster started as a user starts one: idemd
// processes (-store etcd) on an embedded 3-member etcd, node i reaching
// etcd only through member i's Link and its peers reaching it (to forward)
// only through a Link of its own. A seeded schedule SIGKILLs nodes and
// starts them again (a new incarnation), hard-stops the etcd leader and
// restarts it, and partitions a node from etcd and its peers (both links
// blackholed); clients send keyed batches
// (each key incrementing a counter of its own) to random nodes. Then
// everything heals and every key is asked once more. Checked, per key:
// every terminal answer is byte for byte the first; its counter is 1 if
// that answer is a commit and 0 otherwise (applied at most once, exactly
// once when acknowledged); no 201 was lost.
var (
	procChaosSeeds    = flag.Int("procchaos.seeds", 1, "seeds of TestProcessChaos_Cluster (make fault raises it)")
	procChaosDuration = flag.Duration("procchaos.duration", 5*time.Second, "fault schedule per seed")
)

const (
	procChaosNodes   = 3
	procChaosClients = 4
	procChaosWindow  = 6 // keys clients pick from at a time; the window moves each step
	procChaosStep    = 400 * time.Millisecond
)

func TestProcessChaos_Cluster(t *testing.T) {
	// On clusters of its own, paced by a schedule in real time: it waits
	// beside others.
	t.Parallel()
	for seed := range uint64(*procChaosSeeds) {
		t.Run(fmt.Sprintf("seed=%d", seed+1), func(t *testing.T) { runProcChaos(t, seed+1, 1) })
	}
}

// TestProcessChaos_TwoShards is the same chaos on a deployment of two
// store shards (docs/cluster.md "Shards"): two 3-member etcd clusters,
// node i reaching each through its member i's Link, with a shard map of
// its own (the endpoints differ, the placement does not); keys alternate
// between a table of each shard. Every fault hits both clusters: a
// partition cuts a node from both, a leader stop stops both leaders.
func TestProcessChaos_TwoShards(t *testing.T) {
	t.Parallel() // as TestProcessChaos_Cluster
	for seed := range uint64(*procChaosSeeds) {
		t.Run(fmt.Sprintf("seed=%d", seed+1), func(t *testing.T) { runProcChaos(t, seed+1, 2) })
	}
}

type procChaos struct {
	t *testing.T
	// etcds are the store shards' clusters (one: an unsharded
	// deployment), prefixes the deployment's prefix in each, and tables a
	// table of each shard; key k's batches go to tables[k%len(tables)].
	etcds    []*etcdtest.Cluster
	prefixes []string
	tables   []string
	cl       *apitest.Client
	mu       sync.Mutex
	nodes    [procChaosNodes]*apitest.Proc // nil while down
	// peers[i] is the path node i's peers forward to it through (its
	// -advertise): a partition blackholes it with node i's link to etcd.
	peers [procChaosNodes]*etcdtest.Link
	// answers: per key, every terminal answer ("status body").
	answers map[int][]string
	window  atomic.Int64
	kills   int
	// sessions holds each session key's one session (procchaos_sessions_test.go).
	sessions                      map[int]*procSession
	sessionCommits, sessionAborts int
}

func runProcChaos(t *testing.T, seed uint64, shards int) {
	pc := &procChaos{t: t, cl: apitest.NewClient(t, "http://unused"), answers: map[int][]string{}, tables: []string{"t"}}
	for range shards {
		pc.etcds = append(pc.etcds, startCluster(t, etcdtest.Options{Proxied: true, AutoCompactionMode: "periodic", AutoCompactionRetention: "1s"}))
		pc.prefixes = append(pc.prefixes, etcdtest.Prefix(t))
	}
	if shards > 1 {
		pc.tables = tablePerShard(shards)
	}
	for i := range procChaosNodes {
		pc.start(i)
	}
	for _, tbl := range pc.tables {
		pc.client(0).Do("PUT", "/v1/tables/"+tbl, nil).JSON(t, 201, nil)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for cl := range procChaosClients {
		rng := rand.New(rand.NewPCG(seed, uint64(cl)))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				pc.send(int(pc.window.Load())+rng.IntN(procChaosWindow), rng.IntN(procChaosNodes), "")
			}
		})
	}
	ran := pc.schedule(rand.New(rand.NewPCG(seed, 0x9c)), *procChaosDuration)
	close(stop)
	wg.Wait()

	began := time.Now()
	pc.healAll()
	healed := time.Since(began)
	keys := int(pc.window.Load()) + procChaosWindow
	for k := range keys {
		var last string
		testsupport.Poll(t, fmt.Sprintf("key %d terminal after healing", k), testsupport.Patience, func() bool {
			last = pc.send(k, k%procChaosNodes, "wait=5")
			return last != ""
		})
	}
	settled := time.Since(began) - healed
	committed := 0
	for k := range keys {
		as := pc.answers[k]
		for _, a := range as[1:] {
			if a != as[0] {
				t.Fatalf("key %d: answers %q then %q: every retry must get the first terminal answer", k, as[0], a)
			}
		}
		var doc struct {
			Doc struct{ N int }
		}
		n := 0
		if r := pc.client(0).Do("GET", fmt.Sprintf("/v1/tables/%s/docs/ctr-%d", pc.table(k), k), nil); r.Status == 200 {
			if err := json.Unmarshal(r.Body, &doc); err != nil {
				t.Fatal(err)
			}
			n = doc.Doc.N
		}
		want := 0
		if strings.HasPrefix(as[0], "201 ") {
			want = 1
			committed++
		}
		if n != want {
			t.Fatalf("key %d: counter %d, answer %q: want %d", k, n, as[0], want)
		}
	}
	t.Logf("seed %d: %d keys (%d committed), session commit answers %d committed and %d not, faults %v, node kills %d; healing took %v, every key terminal %v later",
		seed, keys, committed, pc.sessionCommits, pc.sessionAborts, ran, pc.kills, healed.Round(time.Millisecond), settled.Round(time.Millisecond))
	if pc.sessionCommits == 0 {
		t.Fatal("no session committed: the schedule left sessions unchecked")
	}
	if committed == 0 {
		t.Fatal("nothing committed: the schedule left nothing to check")
	}
}

// table is key's table.
func (pc *procChaos) table(key int) string { return pc.tables[key%len(pc.tables)] }

// tablePerShard is a table name routed to each of k shards (anonymous's).
func tablePerShard(k int) []string {
	tables := make([]string, k)
	for i, found := 0, 0; found < k; i++ {
		name := fmt.Sprintf("t%d", i)
		if s := api.ShardOf("anonymous", name, k); tables[s] == "" {
			tables[s], found = name, found+1
		}
	}
	return tables
}

func (pc *procChaos) start(i int) {
	// Node i's only path to etcd is member i's Link (of each shard's
	// cluster), and its peers' only path to it is a Link of its own.
	addr := apitest.FreeAddr(pc.t)
	peer := etcdtest.NewLink(pc.t, addr)
	var p *apitest.Proc
	if len(pc.etcds) == 1 {
		p = startNodeOn(pc.t, pc.cl, pc.etcds[0].Endpoints()[i], pc.prefixes[0], fmt.Sprintf("node-%d", i), nil, "-addr", addr, "-advertise", peer.URL())
	} else {
		var shards []shardSpec
		for k, c := range pc.etcds {
			shards = append(shards, shardSpec{fmt.Sprintf("s%d", k), []string{c.Endpoints()[i]}, pc.prefixes[k]})
		}
		args := shardedNodeArgs(pc.t, writeShardMap(pc.t, 1, shards...), fmt.Sprintf("node-%d", i))
		p = apitest.Start(pc.t, pc.cl, pc.t.TempDir(), nil, append(args, "-addr", addr, "-advertise", peer.URL())...)
	}
	pc.mu.Lock()
	pc.nodes[i], pc.peers[i] = p, peer
	pc.mu.Unlock()
}

func (pc *procChaos) client(i int) *apitest.Client {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for j := range procChaosNodes {
		if p := pc.nodes[(i+j)%procChaosNodes]; p != nil {
			return pc.cl.WithBase(p.Base())
		}
	}
	pc.t.Fatal("no node is up")
	return nil
}

// send posts key's batch to node (or the next one up) and records a
// terminal answer; it returns that answer, or "" if there was none.
func (pc *procChaos) send(key, node int, wait string) string {
	if procSessionKey(key) {
		return pc.sendSession(key, node, wait)
	}
	headers := []string{"Idempotency-Key", fmt.Sprint(key)}
	if wait != "" {
		headers = append(headers, "Prefer", wait)
	}
	body := `{"transforms":[{"id":"ctr-` + fmt.Sprint(key) + `","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`
	r, err := pc.client(node).Try("POST", "/v1/tables/"+pc.table(key)+"/batch", body, headers...)
	if err != nil || apitest.TerminalOutcome(r) == "" {
		return ""
	}
	a := fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body))
	pc.mu.Lock()
	pc.answers[key] = append(pc.answers[key], a)
	pc.mu.Unlock()
	return a
}

func (pc *procChaos) schedule(rng *rand.Rand, d time.Duration) map[string]int {
	ran := map[string]int{}
	nodeDown, memberDown, linkDown := -1, -1, -1
	// memberStopped[k] is the member stopped in shard k's cluster (-1:
	// none); memberDown is 1 while any is.
	memberStopped := make([]int, len(pc.etcds))
	for k := range memberStopped {
		memberStopped[k] = -1
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
		waitAWhile(procChaosStep)
		pc.window.Add(procChaosWindow / 2)
		switch r := rng.IntN(6); {
		case r == 0 && nodeDown < 0:
			nodeDown = rng.IntN(procChaosNodes)
			pc.mu.Lock()
			p := pc.nodes[nodeDown]
			pc.nodes[nodeDown] = nil
			pc.mu.Unlock()
			p.Kill()
			pc.kills++
			ran["sigkill-node"]++
		case r == 1 && nodeDown >= 0 && linkDown != nodeDown && !slices.Contains(memberStopped, nodeDown):
			pc.start(nodeDown)
			nodeDown = -1
			ran["restart-node"]++
		case r == 2 && memberDown < 0:
			if pc.stopLeaders(memberStopped) {
				memberDown = 1
				ran["stop-etcd-leader"]++
			}
		case r == 3 && memberDown >= 0:
			for k, m := range memberStopped {
				if m >= 0 {
					pc.etcds[k].Restart(pc.t, m)
					memberStopped[k] = -1
				}
			}
			memberDown = -1
			ran["restart-etcd-member"]++
		case r == 4 && linkDown < 0:
			linkDown = rng.IntN(procChaosNodes)
			for _, c := range pc.etcds {
				c.Link(linkDown).Blackhole()
			}
			pc.peerLink(linkDown).Blackhole()
			ran["partition-node-from-etcd-and-peers"]++
		case r == 5 && linkDown >= 0:
			for _, c := range pc.etcds {
				c.Link(linkDown).Heal()
			}
			pc.peerLink(linkDown).Heal()
			linkDown = -1
			ran["heal"]++
		}
	}
	return ran
}

// stopLeaders hard-stops the leader of each shard's cluster, recording
// them in stopped; false when no leader was found.
func (pc *procChaos) stopLeaders(stopped []int) bool {
	stoppedAny := false
	for k, c := range pc.etcds {
		if l, err := c.Leader(ctx); err == nil {
			c.Stop(l)
			stopped[k], stoppedAny = l, true
		}
	}
	return stoppedAny
}

func (pc *procChaos) peerLink(i int) *etcdtest.Link {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.peers[i]
}

func (pc *procChaos) healAll() {
	for i := range procChaosNodes {
		for _, c := range pc.etcds {
			c.Link(i).Heal()
		}
		pc.peerLink(i).Heal()
	}
	for _, c := range pc.etcds {
		var down []int
		for i := range procChaosNodes {
			if !c.Running(i) {
				down = append(down, i)
			}
		}
		if len(down) > 0 {
			c.Restart(pc.t, down...)
		}
	}
	for i := range procChaosNodes {
		pc.mu.Lock()
		up := pc.nodes[i] != nil
		pc.mu.Unlock()
		if !up {
			pc.start(i)
		}
	}
}
