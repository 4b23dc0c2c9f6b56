package store

import "bytes"

// Namespace is a versioned key prefix such as "rcpt/v1/". A format change adds
// a new version of the namespace or an additive field; old data stays
// readable under its old prefix.
type Namespace string

// The registry of namespaces. Nothing writes a key outside these.
const (
	NSReceipt  Namespace = "rcpt/v1/"   // receipts by txn_id
	NSLease    Namespace = "lease/v1/"  // owner incarnations and per-receipt leases
	NSExpiry   Namespace = "exp/v1/"    // retention deadlines: <deadline>/<txn_id>
	NSRecovery Namespace = "recov/v1/"  // mutable receipts by owner: <owner>/<txn_id>
	NSTxn      Namespace = "txn/v1/"    // 2PC coordinator and decision records
	NSIntent   Namespace = "intent/v1/" // 2PC intents: <table>/<shard>/<doc>
	NSTable    Namespace = "tbl/v1/"    // documents: <table>/<shard>/<doc>
	NSMeta     Namespace = "meta/v1/"   // table metadata and engine bookkeeping
	NSSession  Namespace = "sess/v1/"   // interactive sessions: rec/<id>, and open/<id> while open
	NSTomb     Namespace = "tomb/v1/"   // what is left of an expired receipt: the 16 bytes of its txn_id
)

// Namespaces lists every registered namespace.
var Namespaces = []Namespace{NSReceipt, NSLease, NSExpiry, NSRecovery, NSTxn, NSIntent, NSTable, NSMeta, NSSession, NSTomb}

// Key builds a namespaced key from parts joined by '/'. Parts must not
// contain '/' unless they are the last part; callers that accept arbitrary
// user strings escape or hash them first.
func (ns Namespace) Key(parts ...string) []byte {
	n := len(ns)
	for _, p := range parts {
		n += len(p) + 1
	}
	k := make([]byte, 0, n)
	k = append(k, ns...)
	for i, p := range parts {
		if i > 0 {
			k = append(k, '/')
		}
		k = append(k, p...)
	}
	return k
}

// Prefix returns the namespace prefix followed by parts and a trailing '/',
// for scanning everything under a path.
func (ns Namespace) Prefix(parts ...string) []byte {
	if len(parts) == 0 {
		return []byte(ns)
	}
	return append(ns.Key(parts...), '/')
}

// Has reports whether key lies in the namespace.
func (ns Namespace) Has(key []byte) bool { return bytes.HasPrefix(key, []byte(ns)) }

// Suffix returns key without the namespace prefix.
func (ns Namespace) Suffix(key []byte) []byte { return key[len(ns):] }

// PrefixEnd returns the smallest key greater than every key with prefix p,
// for use as a Scan end bound; nil if there is none.
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
