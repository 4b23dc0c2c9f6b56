package table

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// TestAppendIntent_IsCBORMarshalByteForByte: for intents of every shape
// and of lengths across each CBOR head size, the hand encoding is the
// library's, and decodes back to the intent.
func TestAppendIntent_IsCBORMarshalByteForByte(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, docLen := range []int{0, 1, 23, 24, 255, 256, 65535, 65536, 70000} {
		for shape := range 8 {
			in := intent{Txn: strings.Repeat("t", r.IntN(40)+1), Deleted: shape&1 != 0, Read: shape&2 != 0}
			if shape&4 != 0 || docLen > 0 {
				in.Doc = bytes.Repeat([]byte{byte(r.Uint32())}, docLen)
			}
			want, err := cbor.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			got := appendIntent(nil, in)
			if !bytes.Equal(got, want) {
				t.Fatalf("doc %d shape %d: %x, cbor.Marshal %x", docLen, shape, got[:min(len(got), 32)], want[:min(len(want), 32)])
			}
			if len(got) > intentBytesMax(len(in.Txn), len(in.Doc)) {
				t.Fatalf("%d bytes beyond the bound %d", len(got), intentBytesMax(len(in.Txn), len(in.Doc)))
			}
			var back intent
			if err := cbor.Unmarshal(got, &back); err != nil || back.Txn != in.Txn || back.Deleted != in.Deleted || back.Read != in.Read || !bytes.Equal(back.Doc, in.Doc) {
				t.Fatalf("decoded %+v, %v", back, err)
			}
		}
	}
}
