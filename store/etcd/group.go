package etcdstore

import (
	"context"
	"fmt"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
)

// Group commit across Applies (issue 39 part 1). One etcd Txn costs a
// Raft round trip whatever it carries, and etcd nests Txns: a Txn whose
// Then branch holds other Txns, each with its own Compares, Then and Else,
// runs them all in one proposal, one revision. So while this store has
// GroupInFlightMax Txns in flight, further Applies queue, and the next
// Txn to finish sends the queue as one Txn of nested sub-Txns — Kafka's
// producer batching, with no linger: below the in-flight bound every
// Apply is sent at once and alone, exactly as before, so a lone client
// waits for nothing; a group forms only from Applies that would have
// waited anyway.
//
// Each sub-Txn keeps its own Compares and outcome: the group itself has
// no Compare, and one sub-Txn's failed Compare runs its own Else reads
// and leaves the others be. etcd evaluates every nested Compare against
// the state before the whole Txn and forbids a key written twice in one
// Txn, so a key one sub-Txn writes is touched by no other sub-Txn of its
// group: an Apply that would waits for the next group. Only a key no one
// in the group writes may be compared by several (every keyed Begin
// compares its table's metadata): each compare then sees the state every
// other sub-Txn left as it was, so the group is the same as the sub-Txns
// run one after another. An ambiguous
// answer is settled per sub-Txn by its own nonce, as a single Apply's is
// (resolve.go); an explicit rejection of a group (too large, no space:
// nothing was written) is not trusted for its members, which are sent
// again alone, each getting its own answer.

// DefaultGroupInFlightMax is Options.GroupInFlightMax's default: enough
// Txns in flight that one client's latency is never a group's, few enough
// that under load most Applies ride in a group.
const DefaultGroupInFlightMax = 4

// groupSubOverheadBytes is what nesting adds per sub-Txn (the RequestOp
// and its length prefixes), kept free of the request limit.
const groupSubOverheadBytes = 16

// grouper queues Applies while the in-flight bound is reached.
type grouper struct {
	mu       sync.Mutex
	inFlight int
	queue    []*groupMember
}

// groupMember is one queued Apply's Txn and, once sent, its answer.
type groupMember struct {
	req      *pb.TxnRequest
	writes   []string // keys its Then branch puts or deletes
	compares []string // keys its Compares read
	size     int
	opc      int           // its largest branch: etcd's --max-txn-ops budget, shared with the group's own level
	taken    bool          // sent (in a group, or alone); under grouper.mu
	done     chan struct{} // closed once resp/err are set
	resp     *pb.TxnResponse
	err      error
}

// commit sends an Apply's Txn, alone or in a group, and returns its own
// answer: a group's sub-response carries the group's header. The error is
// the Txn call's, for settle.
func (s *Store) commit(ctx context.Context, req *pb.TxnRequest) (*pb.TxnResponse, error) {
	if s.groupMax < 0 {
		return s.send(ctx, req)
	}
	g := &s.group
	g.mu.Lock()
	if g.inFlight < s.groupMax && len(g.queue) == 0 {
		g.inFlight++
		g.mu.Unlock()
		resp, err := s.send(ctx, req)
		s.sent()
		return resp, err
	}
	m := &groupMember{req: req, size: proto.Size(req), opc: max(len(req.Compare), len(req.Success), len(req.Failure)), done: make(chan struct{})}
	m.writes, m.compares = txnKeys(req)
	g.queue = append(g.queue, m)
	s.launchLocked()
	g.mu.Unlock()
	select {
	case <-m.done:
		return m.resp, m.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	if !m.taken { // never sent: nothing written
		g.queue = removeMember(g.queue, m)
		g.mu.Unlock()
		return nil, &notSentError{ctx.Err()}
	}
	g.mu.Unlock()
	<-m.done // sent: its answer is bounded by the call timeout
	return m.resp, m.err
}

// notSentError is the caller's context ending while its Apply was still
// queued: the Txn was never sent, so nothing was written and there is
// nothing to settle.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// send is one Txn call under the call timeout.
func (s *Store) send(ctx context.Context, req *pb.TxnRequest) (*pb.TxnResponse, error) {
	s.stats.txns.Add(1)
	cctx, cancel := context.WithTimeout(ctx, s.call)
	defer cancel()
	return s.kv.Txn(cctx, req)
}

// sent ends one Txn in flight and, if Applies queued meanwhile, sends
// the next group in its place.
func (s *Store) sent() {
	g := &s.group
	g.mu.Lock()
	g.inFlight--
	s.launchLocked()
	g.mu.Unlock()
}

// launchLocked sends the next group if Applies are queued and a Txn may
// be put in flight; grouper.mu is held. Every change of the queue or of
// the Txns in flight calls it, so no Apply stays queued while there is
// room.
func (s *Store) launchLocked() {
	g := &s.group
	if len(g.queue) == 0 || g.inFlight >= s.groupMax {
		return
	}
	group := s.takeGroup()
	g.inFlight++
	go func() {
		s.sendGroup(group)
		s.sent()
	}()
}

// takeGroup takes from the queue, in order, the Applies that fit one Txn
// and share no key with those taken before them; grouper.mu is held.
func (s *Store) takeGroup() []*groupMember {
	g := &s.group
	var (
		group []*groupMember
		rest  = g.queue[:0]
		// written: keys a taken sub-Txn writes; compared: keys one compares
		written  = make(map[string]struct{})
		compared = make(map[string]struct{})
		size     int
		opc      int // the largest sub-Txn branch taken
	)
	for _, m := range g.queue {
		// etcd checks --max-txn-ops per level, and a nested level gets
		// what its parent's own ops leave: sub-Txns plus the largest
		// sub-Txn's branch must fit it.
		full := len(group)+1+max(opc, m.opc) > s.groupSubsMax || size+m.size+groupSubOverheadBytes > s.reqMax
		clash := anyIn(written, m.writes) || anyIn(compared, m.writes) || anyIn(written, m.compares)
		if len(group) > 0 && (full || clash) {
			rest = append(rest, m)
			continue
		}
		for _, k := range m.writes {
			written[k] = struct{}{}
		}
		for _, k := range m.compares {
			compared[k] = struct{}{}
		}
		size += m.size + groupSubOverheadBytes
		opc = max(opc, m.opc)
		m.taken = true
		group = append(group, m)
	}
	clear(g.queue[len(rest):])
	g.queue = rest
	return group
}

// sendGroup sends a group and hands each member its answer.
func (s *Store) sendGroup(group []*groupMember) {
	if len(group) == 1 {
		m := group[0]
		m.resp, m.err = s.send(context.Background(), m.req)
		close(m.done)
		return
	}
	s.stats.groups.Add(1)
	s.stats.grouped.Add(uint64(len(group)))
	outer := &pb.TxnRequest{Success: make([]*pb.RequestOp, len(group))}
	for i, m := range group {
		outer.Success[i] = &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: m.req}}
	}
	resp, err := s.send(context.Background(), outer)
	if err != nil && !isAmbiguous(applyError(err)) {
		// etcd refused the group before proposing it: nothing was
		// written, and the cause may be one member's, or the group's
		// size. Each member learns its own answer alone.
		s.stats.split.Add(1)
		var wg sync.WaitGroup
		for _, m := range group {
			wg.Go(func() {
				m.resp, m.err = s.send(context.Background(), m.req)
				close(m.done)
			})
		}
		wg.Wait()
		return
	}
	for i, m := range group {
		m.resp, m.err = subResponse(resp, err, i)
		close(m.done)
	}
}

// subResponse is member i's answer in a group's: its own sub-Txn's
// response under the group's header, or the group's error (ambiguous:
// settled by the member's nonce).
func subResponse(resp *pb.TxnResponse, err error, i int) (*pb.TxnResponse, error) {
	if err != nil {
		return nil, err
	}
	if i >= len(resp.Responses) || resp.Responses[i].GetResponseTxn() == nil {
		return nil, fmt.Errorf("etcdstore: etcd answered a group of Txns without sub-Txn %d's response", i)
	}
	sub := resp.Responses[i].GetResponseTxn()
	sub.Header = resp.Header
	return sub, nil
}

// txnKeys are the keys a Txn writes and those it compares. (Its Else
// branch reads only keys it compares.)
func txnKeys(req *pb.TxnRequest) (writes, compares []string) {
	writes = make([]string, 0, len(req.Success))
	for _, op := range req.Success {
		switch r := op.Request.(type) {
		case *pb.RequestOp_RequestPut:
			writes = append(writes, string(r.RequestPut.Key))
		case *pb.RequestOp_RequestDeleteRange:
			writes = append(writes, string(r.RequestDeleteRange.Key))
		}
	}
	compares = make([]string, 0, len(req.Compare))
	for _, c := range req.Compare {
		compares = append(compares, string(c.Key))
	}
	return writes, compares
}

func anyIn(taken map[string]struct{}, keys []string) bool {
	for _, k := range keys {
		if _, ok := taken[k]; ok {
			return true
		}
	}
	return false
}

func removeMember(q []*groupMember, m *groupMember) []*groupMember {
	for i, x := range q {
		if x == m {
			return append(q[:i], q[i+1:]...)
		}
	}
	return q
}
