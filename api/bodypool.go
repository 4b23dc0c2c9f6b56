package api

import "sync"

// A batch body lives only while its handler runs: the decode copies what
// it keeps into the batch's own canonical buffer, the digest is a copy,
// and the answer is the receipt's envelope. So the batch route hands its
// body's buffer back when it is done, and the next body is read into it
// instead of a new one — a keyed request then allocates its body's bytes
// no more (issue 41: with the batch's own buffers these are most of what
// the handler allocates, and the collector's work follows the bytes).
//
// The buffers come in two sizes, whole arrays, so that one is pooled as
// the pointer to its array and neither Get nor Put allocates. A body
// larger than the larger size gets a buffer of its own, as before.
const (
	bodyBufSmall = 4 << 10  // a batch of about 20 documents of 190 bytes
	bodyBufLarge = 32 << 10 // and of about 160
)

var (
	bodyBufsSmall = sync.Pool{New: func() any { return new([bodyBufSmall]byte) }}
	bodyBufsLarge = sync.Pool{New: func() any { return new([bodyBufLarge]byte) }}
)

// takeBodyBuf is an empty buffer of at least n bytes' capacity. Its
// contents are the last body's: readAllSized only reads into it.
func takeBodyBuf(n int64) []byte {
	switch {
	case n <= bodyBufSmall:
		return bodyBufsSmall.Get().(*[bodyBufSmall]byte)[:0]
	case n <= bodyBufLarge:
		return bodyBufsLarge.Get().(*[bodyBufLarge]byte)[:0]
	}
	return make([]byte, 0, n)
}

// recycleBody gives body's buffer back for the next body. The caller
// must hold no reference into it any more, nor have handed it to anything
// that may (a forward's transport may read a request body after its
// round trip returned). A buffer of another size is left to the
// collector.
func recycleBody(body []byte) {
	switch cap(body) {
	case bodyBufSmall:
		bodyBufsSmall.Put((*[bodyBufSmall]byte)(body[:bodyBufSmall]))
	case bodyBufLarge:
		bodyBufsLarge.Put((*[bodyBufLarge]byte)(body[:bodyBufLarge]))
	}
}
