package api

import (
	"bytes"
	"strings"
	"testing"
)

// takeBodyBuf serves every size: at least the capacity asked, empty.
func TestTakeBodyBuf_AtLeastTheSizeAsked(t *testing.T) {
	for _, n := range []int64{1, bodyBufSmall - 1, bodyBufSmall, bodyBufSmall + 1, bodyBufLarge, bodyBufLarge + 1, 1 << 20} {
		b := takeBodyBuf(n)
		if len(b) != 0 || int64(cap(b)) < n {
			t.Fatalf("takeBodyBuf(%d): len %d cap %d", n, len(b), cap(b))
		}
		recycleBody(b)
	}
	recycleBody(make([]byte, 10)) // a buffer of no pooled size is left alone
	recycleBody(nil)
}

// A recycled buffer holds the last body's bytes; a shorter body read into
// it is that body alone, none of the last one's tail. Run many times, so
// that the pool hands a recycled buffer back (it may drop some, under
// -race on purpose).
func TestReadAllSized_RecycledBufferHoldsOnlyTheNewBody(t *testing.T) {
	for i := range 50 {
		for _, size := range []int{bodyBufSmall - 1, bodyBufLarge - 1} {
			long := strings.Repeat("x", size)
			b, err := readAllSized(strings.NewReader(long), int64(size), 1<<20)
			if err != nil || string(b) != long {
				t.Fatalf("round %d: long body: %d bytes, %v", i, len(b), err)
			}
			recycleBody(b)
			short := []byte(`{"inserts":[]}`)
			got, err := readAllSized(bytes.NewReader(short), int64(len(short)), 1<<20)
			if err != nil || !bytes.Equal(got, short) {
				t.Fatalf("round %d: short body after a recycled %d: %q, %v", i, size, got, err)
			}
			recycleBody(got)
		}
	}
}
