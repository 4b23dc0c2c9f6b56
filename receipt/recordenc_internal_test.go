package receipt

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemdb/idem/lease"
)

// The hand encoder writes exactly encMode's bytes: on random records that
// set each field or leave it zero (strings and byte strings across every
// length class of a CBOR head, integers of both signs and every width, nil
// and empty byte strings), and on every golden record.
func TestEncodeRecordFastMatchesCBOR(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 64))
	for i := range 20000 {
		r := randomRecord(rng)
		want, err := encMode.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := encodeRecordFast(r)
		if r.Owner != nil {
			if ok {
				t.Fatalf("record %d has an Owner, yet the hand encoder took it", i)
			}
			continue
		}
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("record %d %+v (envelope %+v):\n got %x\nwant %x", i, r, r.Envelope, got, want)
		}
	}
}

func TestEncodeRecordFastGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "schema*.cbor"))
	if err != nil || len(files) == 0 {
		t.Fatalf("golden files: %v, %v", files, err)
	}
	for _, f := range files {
		stored, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeRecord(stored)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		w := timesOnWire(r)
		want, err := encMode.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := encodeRecordFast(w)
		if w.Owner != nil {
			if ok {
				t.Errorf("%s has an Owner, yet the hand encoder took it", f)
			}
			continue
		}
		if !ok || !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %x\nwant %x", f, got, want)
		}
	}
}

func randomRecord(rng *rand.Rand) *Record {
	r := &Record{Schema: int(randInt(rng)), Principal: randText(rng), Table: randText(rng), Key: randText(rng),
		Fingerprint: randBytes(rng), Request: randBytes(rng), State: State(rng.UintN(256)), Created: randInt(rng),
		Started: randInt(rng), Completed: randInt(rng), RetainUntil: randInt(rng), Debt: Debt(rng.UintN(256)),
		Outcome: randText(rng), Session: randText(rng), ProtectUntil: randInt(rng), Entries: randBytes(rng),
		ResolvedBy: randText(rng), BodyDigest: randBytes(rng)}
	if rng.IntN(2) == 0 {
		r.Envelope = &StoredEnvelope{Status: int(randInt(rng)), Outcome: randText(rng), Code: randText(rng),
			Message: randText(rng), Retryable: rng.IntN(2) == 0, RetryWith: randText(rng), Result: randBytes(rng),
			Retry: randText(rng)}
	}
	if rng.IntN(8) == 0 {
		r.Owner = &lease.Claim{Node: "n", Incarnation: 1, Epoch: 1}
	}
	return r
}

// randInt is zero half the time, else an integer of a random width and
// sign, the bounds of each width included.
func randInt(rng *rand.Rand) int64 {
	if rng.IntN(2) == 0 {
		return 0
	}
	edges := [...]int64{1, 23, 24, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, 1_700_000_000_000}
	v := edges[rng.IntN(len(edges))]
	if rng.IntN(3) == 0 {
		v = rng.Int64N(v) // a value below the edge
	}
	if rng.IntN(2) == 0 {
		v = -v
		if rng.IntN(8) == 0 {
			v = math.MinInt64
		}
	}
	return v
}

// randLen is a length in a random head class: 0, below 24, one byte, two.
func randLen(rng *rand.Rand) int {
	switch rng.IntN(5) {
	case 0:
		return 0
	case 1:
		return 1 + rng.IntN(23)
	case 2:
		return 23 + rng.IntN(3)
	case 3:
		return 24 + rng.IntN(240)
	}
	return 255 + rng.IntN(400)
}

func randText(rng *rand.Rand) string {
	if rng.IntN(3) == 0 {
		return ""
	}
	return strings.Repeat("é", randLen(rng)/2) + strings.Repeat("x", randLen(rng)%2)
}

// randBytes is nil, empty or bytes of a random length.
func randBytes(rng *rand.Rand) []byte {
	switch rng.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, randLen(rng))
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	return b
}
