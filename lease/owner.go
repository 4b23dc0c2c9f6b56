package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/store"
)

// Owner is a process's identity: a stable node ID and an incarnation that
// grows durably at every open. A new incarnation may adopt its
// predecessor's receipts at once — the predecessor is, by construction, gone
// or fenced.
type Owner struct {
	Node        string
	Incarnation uint64
}

func (o Owner) String() string { return fmt.Sprintf("%s#%d", o.Node, o.Incarnation) }

// NodeIDBytesMax bounds a node ID.
const NodeIDBytesMax = 64

// registerRetriesMax bounds the CAS attempts of Register.
const registerRetriesMax = 16

func nodeKey(node string) []byte { return store.NSLease.Key("node", node) }

type nodeRecord struct {
	Incarnation uint64 `cbor:"1,keyasint"`
	Advertise   string `cbor:"2,keyasint,omitempty"`
}

// AdvertiseBytesMax bounds the address a node advertises to its peers.
const AdvertiseBytesMax = 256

// Node is what a node's record says: its current incarnation and the
// address its peers reach it at ("" for a node that serves alone).
type Node struct {
	Owner
	Advertise string
}

// Register bumps node's incarnation durably and returns the new identity.
func Register(ctx context.Context, st store.Store, node string) (Owner, error) {
	return RegisterAt(ctx, st, node, "")
}

// RegisterAt is Register for a node that peers reach at advertise: the
// address is written with the new incarnation, in the same fenced record,
// so that it always names the incarnation that wrote it. A second process
// with the same node ID registers a later incarnation and fences the first.
func RegisterAt(ctx context.Context, st store.Store, node, advertise string) (Owner, error) {
	if node == "" || len(node) > NodeIDBytesMax {
		return Owner{}, fmt.Errorf("lease: node id must be 1..%d bytes", NodeIDBytesMax)
	}
	if len(advertise) > AdvertiseBytesMax {
		return Owner{}, fmt.Errorf("lease: advertised address of %d bytes (at most %d)", len(advertise), AdvertiseBytesMax)
	}
	for i := 0; i < registerRetriesMax; i++ {
		var cur nodeRecord
		var ver store.Version
		it, err := st.Get(ctx, nodeKey(node))
		switch {
		case err == nil:
			if err := cbor.Unmarshal(it.Value, &cur); err != nil {
				return Owner{}, store.RecordError(it.Key, "lease: node record", err)
			}
			ver = it.Version
		case !errors.Is(err, store.ErrNotFound):
			return Owner{}, err
		}
		next := nodeRecord{Incarnation: cur.Incarnation + 1, Advertise: advertise}
		val, _ := cbor.Marshal(next)
		_, err = st.Apply(ctx, new(store.Batch).AtVersion(nodeKey(node), ver).Put(nodeKey(node), val))
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		if err != nil {
			return Owner{}, err
		}
		return Owner{Node: node, Incarnation: next.Incarnation}, nil
	}
	return Owner{}, fmt.Errorf("lease: register %s: too much contention", node)
}

// ReadNode returns node's record; store.ErrNotFound if it never
// registered.
func ReadNode(ctx context.Context, st store.Store, node string) (Node, error) {
	it, err := st.Get(ctx, nodeKey(node))
	if err != nil {
		return Node{}, err
	}
	var rec nodeRecord
	if err := cbor.Unmarshal(it.Value, &rec); err != nil {
		return Node{}, store.RecordError(it.Key, "lease: node record", err)
	}
	return Node{Owner: Owner{Node: node, Incarnation: rec.Incarnation}, Advertise: rec.Advertise}, nil
}

// Nodes lists the IDs of the nodes that ever registered in store, up to
// limit (at most the store's ScanItemsMax), in ID order.
func Nodes(ctx context.Context, st store.Store, limit int) ([]string, error) {
	prefix := store.NSLease.Prefix("node")
	items, err := st.Scan(ctx, prefix, store.PrefixEnd(prefix), min(limit, st.Limits().ScanItemsMax))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, string(it.Key[len(prefix):]))
	}
	return out, nil
}
