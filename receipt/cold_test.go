package receipt

import (
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/store"
)

// TestColdValue_ImmutableRecordsAndDocumentsLeaveRAM: terminal receipts, tombstones, the
// expiry index's chunks and documents not too small to be worth a pread
// go to the value log; the other records the request path reads and
// conditions on stay in RAM.
func TestColdValue_ImmutableRecordsAndDocumentsLeaveRAM(t *testing.T) {
	rec := func(s State) []byte {
		b, err := cbor.Marshal(&Record{Schema: SchemaCurrent, Principal: "p", State: s, Envelope: &StoredEnvelope{}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	owing, err := cbor.Marshal(&Record{Schema: SchemaCurrent, Principal: "p", State: Terminal, Debt: VisibilityDebt, Envelope: &StoredEnvelope{}})
	if err != nil {
		t.Fatal(err)
	}
	id := "00112233445566778899aabbccddeeff"
	for _, c := range []struct {
		what  string
		key   []byte
		value []byte
		want  bool
	}{
		{"terminal receipt", store.NSReceipt.Key(id), rec(Terminal), true},
		{"terminal receipt owing visibility debt", store.NSReceipt.Key(id), owing, false},
		{"pending receipt", store.NSReceipt.Key(id), rec(Pending), false},
		{"started receipt", store.NSReceipt.Key(id), rec(Started), false},
		{"tombstone", TombstoneKey(id), make([]byte, 21), true},
		{"damaged receipt", store.NSReceipt.Key(id), []byte{0xff, 0x00}, false},
		{"a document", store.NSTable.Key("t", "0", "d"), make([]byte, docColdBytesMin), true},
		{"a small document", store.NSTable.Key("t", "0", "d"), make([]byte, docColdBytesMin-1), false},
		{"a document's intent", store.NSIntent.Key("t", "0", "d"), make([]byte, 200), false},
		{"a lease", store.NSLease.Key("claim", id), rec(Terminal), false},
		{"a session record", store.NSSession.Key("rec", "s"+id), rec(Terminal), false},
		{"an expiry entry", expiryKey(1, id), nil, false},
		{"a session's expiry entry", expiryKey(1, "s"+id), nil, false},
		{"a chunk of expiry entries", rcptChunkKey(1, id), make([]byte, 24), true},
		{"a chunk of tombstones", expiryKey(1, tombChunkPrefix+id), make([]byte, 16), true},
	} {
		if got := ColdValue(c.key, c.value); got != c.want {
			t.Errorf("%s: ColdValue = %v, want %v", c.what, got, c.want)
		}
	}
}
