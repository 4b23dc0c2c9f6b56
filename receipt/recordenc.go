package receipt

import (
	"encoding/binary"
	"math"
)

// The receipt record's encoder, by hand (issue 41: keyed@64 against
// fast@64). Every keyed request encodes one record: fxamacker/cbor's
// reflective encoder took 1.7 µs of it in a CPU profile of the keyed flow
// (2026-12-05, a loaded machine), this one 1.3 µs, in one allocation of
// the record's size. The bytes are exactly encMode's — Core
// Deterministic Encoding (RFC 8949 §4.2.1): a map whose integer keys are
// in ascending order (each one byte, below 24), every integer in its
// shortest form, omitempty fields left out, a nil byte string that is not
// omitempty as null — and recordenc_internal_test.go holds it to encMode on random
// records and on the golden files. A record it does not cover (one with
// an Owner, which only non-terminal records carry) goes to encMode.

// cborMajor* are CBOR's major types, in the initial byte's top three bits.
const (
	cborUint  = 0 << 5
	cborNeg   = 1 << 5
	cborBytes = 2 << 5
	cborText  = 3 << 5
	cborMap   = 5 << 5
	cborNull  = 0xf6
	cborTrue  = 0xf5
)

// encodeRecordFast returns r encoded as encMode would, or ok=false for a
// record it leaves to encMode.
func encodeRecordFast(r *Record) (_ []byte, ok bool) {
	if r.Owner != nil {
		return nil, false
	}
	// Two passes over the fields, the first counting: one allocation of
	// exactly the record's size.
	size := recordEnc{counting: true}
	size.fields(r)
	e := recordEnc{buf: make([]byte, 0, size.n)}
	e.fields(r)
	return e.buf, true
}

// fields writes r's map.
func (e *recordEnc) fields(r *Record) {
	e.head(cborMap, uint64(recordFields(r)))
	e.int(1, int64(r.Schema), true)
	e.text(2, r.Principal, true)
	e.text(3, r.Table, true)
	e.text(4, r.Key, true)
	e.bytes(5, r.Fingerprint, true)
	e.bytes(6, r.Request, false)
	e.int(7, int64(r.State), true)
	e.int(9, r.Created, true)
	e.int(10, r.Started, false)
	e.int(11, r.Completed, false)
	e.int(12, r.RetainUntil, false)
	e.int(13, int64(r.Debt), false)
	if r.Envelope != nil {
		e.key(14)
		e.envelope(r.Envelope)
	}
	e.text(15, r.Outcome, false)
	e.text(16, r.Session, false)
	e.int(17, r.ProtectUntil, false)
	e.bytes(18, r.Entries, false)
	e.text(20, r.ResolvedBy, false)
	e.bytes(21, r.BodyDigest, false)
}

// recordFields counts the map entries encodeRecordFast writes: the fields
// that are always there and the omitempty ones that are not zero.
func recordFields(r *Record) int {
	n := 7 // schema, principal, table, key, fingerprint, state, created
	for _, set := range [...]bool{len(r.Request) > 0, r.Started != 0, r.Completed != 0, r.RetainUntil != 0,
		r.Debt != 0, r.Envelope != nil, r.Outcome != "", r.Session != "", r.ProtectUntil != 0,
		len(r.Entries) > 0, r.ResolvedBy != "", len(r.BodyDigest) > 0} {
		if set {
			n++
		}
	}
	return n
}

// envelope writes s as encMode writes a StoredEnvelope.
func (e *recordEnc) envelope(s *StoredEnvelope) {
	n := 2 // status, outcome
	for _, set := range [...]bool{s.Code != "", s.Message != "", s.Retryable, s.RetryWith != "", len(s.Result) > 0, s.Retry != ""} {
		if set {
			n++
		}
	}
	e.head(cborMap, uint64(n))
	e.int(1, int64(s.Status), true)
	e.text(2, s.Outcome, true)
	e.text(3, s.Code, false)
	e.text(4, s.Message, false)
	if s.Retryable {
		e.key(5)
		e.raw(cborTrue)
	}
	e.text(6, s.RetryWith, false)
	e.bytes(7, s.Result, false)
	e.text(8, s.Retry, false)
}

// recordEnc appends CBOR to buf or, counting, adds its length to n.
type recordEnc struct {
	buf      []byte
	n        int
	counting bool
}

// raw writes b (a string's or byte string's contents, or an initial byte).
func (e *recordEnc) raw(b ...byte) {
	if e.counting {
		e.n += len(b)
		return
	}
	e.buf = append(e.buf, b...)
}

func (e *recordEnc) rawString(s string) {
	if e.counting {
		e.n += len(s)
		return
	}
	e.buf = append(e.buf, s...)
}

// head writes an initial byte of major type major and argument v, in its
// shortest form.
func (e *recordEnc) head(major byte, v uint64) {
	var b [9]byte
	switch {
	case v < 24:
		e.raw(major | byte(v))
	case v <= math.MaxUint8:
		e.raw(major|24, byte(v))
	case v <= math.MaxUint16:
		b[0] = major | 25
		binary.BigEndian.PutUint16(b[1:], uint16(v))
		e.raw(b[:3]...)
	case v <= math.MaxUint32:
		b[0] = major | 26
		binary.BigEndian.PutUint32(b[1:], uint32(v))
		e.raw(b[:5]...)
	default:
		b[0] = major | 27
		binary.BigEndian.PutUint64(b[1:], v)
		e.raw(b[:]...)
	}
}

// key writes a map key (every key of these maps is below 24).
func (e *recordEnc) key(k byte) { e.raw(cborUint | k) }

func (e *recordEnc) int(k byte, v int64, always bool) {
	if v == 0 && !always {
		return
	}
	e.key(k)
	if v < 0 {
		e.head(cborNeg, uint64(-(v + 1)))
		return
	}
	e.head(cborUint, uint64(v))
}

func (e *recordEnc) text(k byte, s string, always bool) {
	if s == "" && !always {
		return
	}
	e.key(k)
	e.head(cborText, uint64(len(s)))
	e.rawString(s)
}

// bytes writes b; a nil b that is always written is null, as encMode
// writes a nil slice.
func (e *recordEnc) bytes(k byte, b []byte, always bool) {
	if len(b) == 0 && !always {
		return
	}
	e.key(k)
	if b == nil {
		e.raw(cborNull)
		return
	}
	e.head(cborBytes, uint64(len(b)))
	e.raw(b...)
}
