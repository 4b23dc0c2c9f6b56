package receipt

import "math"

// A schema-3 record stores Started, Completed, RetainUntil and
// ProtectUntil as offsets from Created instead of unix ms: an absolute
// time is a 9-byte CBOR integer, an offset of a few ms one byte and the
// retention's day five, 20 of the 99 bytes a terminal record held beside
// its envelope (issue 41 part 4: RAM per retained receipt with every
// value in RAM). Record keeps absolute times; only the encoding differs.
//
// An offset o is written as o+1 when o ≥ 0 and as o when negative (a
// time before Created, which another node's clock may give), so that 0
// still means the time is absent (omitempty) as it does in schema 2.

// offsetMax bounds an offset's magnitude: far beyond any real span, and
// far from int64's ends, so that o+1 and Created+o never overflow.
const offsetMax = math.MaxInt64 / 4

// timesOnWire returns r as a schema-3 (or 4) record is written: r itself
// below schema 3, else a copy with the times as offsets. A record whose
// times lie too far from Created to offset is written as schema 2, which
// means the same with absolute times (and, for schema 4, the envelope
// whole).
func timesOnWire(r *Record) *Record {
	if r.Schema < Schema3 {
		return r
	}
	c := *r
	ok := true
	for _, t := range []*int64{&c.Started, &c.Completed, &c.RetainUntil, &c.ProtectUntil} {
		var fits bool
		*t, fits = toOffset(r.Created, *t)
		ok = ok && fits
	}
	if !ok {
		c = *r
		c.Schema = Schema2
	}
	return &c
}

// timesFromWire turns a decoded schema-3 record's offsets back into
// times.
func timesFromWire(r *Record) {
	if r.Schema < Schema3 {
		return
	}
	for _, t := range []*int64{&r.Started, &r.Completed, &r.RetainUntil, &r.ProtectUntil} {
		*t = fromOffset(r.Created, *t)
	}
}

// toOffset encodes t (0: absent) as an offset from created; fits is false
// when it lies too far to.
func toOffset(created, t int64) (int64, bool) {
	if t == 0 {
		return 0, true
	}
	if t < -offsetMax || t > offsetMax || created < -offsetMax || created > offsetMax {
		return 0, false
	}
	o := t - created
	if o < 0 {
		return o, true
	}
	return o + 1, true
}

// fromOffset decodes toOffset's o. Bytes no writer made may wrap: the
// record's validation judges the times, not this.
func fromOffset(created, o int64) int64 {
	switch {
	case o == 0:
		return 0
	case o > 0:
		return created + o - 1
	}
	return created + o
}
