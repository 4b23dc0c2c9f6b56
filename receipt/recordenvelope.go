package receipt

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/code"
)

// A schema-4 record is schema 3 with the envelope of a committed keyed
// batch stored as its three counts (field 22) instead of whole (field
// 14): status 201, outcome committed, retry_with none and nothing else
// are what every such envelope holds, and its result is the
// {"inserted":i,"deleted":d,"transformed":t} resultJSON writes. That is
// 5 bytes instead of 68 of the 226 a terminal record of a 10-document
// batch holds in schema 3 (issue 41 part 4: RAM per retained receipt
// with every value in RAM).
//
// A replay answers the stored envelope byte for byte (docs/design.md
// §4), so the writer keeps the counts only when the envelope it rebuilds
// from them equals the one it holds, field by field and the result's
// bytes; any other envelope goes out whole, as in schema 3. Record keeps
// the envelope; only the encoding differs.

// recordWire is a record as a schema-4 writer may lay it out. Builds that
// know no schema 4 ignore field 22, as any unknown field; this one reads a
// record of schema 3 or older that carries it as its schema says, without
// it, and counts that are not three ints as corruption in any schema.
type recordWire struct {
	Record
	// A pointer, not a slice: it keeps recordWire in Record's size class,
	// and every record read is decoded into one.
	Counts *resultCounts `cbor:"22,keyasint,omitempty"`
}

// resultCounts are a committed result's inserted, deleted and transformed.
type resultCounts [3]int64

// UnmarshalCBOR refuses an array of any other length, which a plain array
// would take, cut or padded with zeros.
func (c *resultCounts) UnmarshalCBOR(b []byte) error {
	var s []int64
	if err := cbor.Unmarshal(b, &s); err != nil {
		return err
	}
	if len(s) != len(c) {
		return errBadCounts
	}
	copy(c[:], s)
	return nil
}

// onWire is r as its schema writes it: times as offsets from schema 3
// (timesOnWire, which falls back to schema 2), the committed envelope as
// counts from schema 4 when they rebuild it exactly.
func onWire(r *Record) any {
	c := timesOnWire(r)
	if c.Schema < Schema4 {
		return c
	}
	counts, ok := committedCounts(c.Envelope)
	if !ok {
		return c
	}
	w := &recordWire{Record: *c, Counts: &counts}
	w.Envelope = nil
	return w
}

// unmarshalRecord decodes b with a schema-4 record's counts turned back
// into its envelope; its times are still as stored.
func unmarshalRecord(b []byte) (*Record, error) {
	var w recordWire
	if err := cbor.Unmarshal(b, &w); err != nil {
		return nil, err
	}
	r := &w.Record
	if r.Schema < Schema4 || w.Counts == nil {
		return r, nil
	}
	if r.Envelope != nil {
		return nil, errBadCounts
	}
	r.Envelope = committedEnvelope(*w.Counts)
	return r, nil
}

var errBadCounts = errors.New("schema-4 counts that are not three, or beside a whole envelope")

// countNames are the result's fields, in the order resultJSON writes them.
var countNames = [...]string{`{"inserted":`, `,"deleted":`, `,"transformed":`}

// committedEnvelope is the envelope a schema-4 record's counts stand for.
func committedEnvelope(counts resultCounts) *StoredEnvelope {
	res := make([]byte, 0, resultJSONBytes)
	for i, n := range counts {
		res = strconv.AppendInt(append(res, countNames[i]...), n, 10)
	}
	return &StoredEnvelope{Status: 201, Outcome: OutcomeCommitted, RetryWith: string(code.None),
		Result: append(res, '}')}
}

// committedCounts are the counts se can be stored as, if committedEnvelope
// rebuilds exactly se from them. A field added to StoredEnvelope must be
// refused here when set, or counts would drop it
// (TestRecordEnvelope_EveryOtherFieldKeepsItWhole).
func committedCounts(se *StoredEnvelope) (resultCounts, bool) {
	var counts resultCounts
	if se == nil || se.Status != 201 || se.Outcome != OutcomeCommitted || se.RetryWith != string(code.None) ||
		se.Code != "" || se.Message != "" || se.Retryable || se.Retry != "" {
		return counts, false
	}
	rest := se.Result
	for i, name := range countNames {
		if !bytes.HasPrefix(rest, []byte(name)) {
			return counts, false
		}
		rest = rest[len(name):]
		n := 0
		for n < len(rest) && (rest[n] == '-' || rest[n] >= '0' && rest[n] <= '9') {
			n++
		}
		v, err := strconv.ParseInt(string(rest[:n]), 10, 64)
		if err != nil {
			return counts, false
		}
		counts[i], rest = v, rest[n:]
	}
	// The digits may be spelt another way ("007", "-0"): only what the
	// counts rebuild to byte for byte is stored as them.
	if string(rest) != "}" || !bytes.Equal(committedEnvelope(counts).Result, se.Result) {
		return counts, false
	}
	return counts, true
}
