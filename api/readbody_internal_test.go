package api

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readAllSized reads everything whatever the Content-Length says: exact,
// short, long, absent or beyond the bound — one byte at a time too.
func TestReadAllSized_ReadsEverythingWhateverTheHint(t *testing.T) {
	body := strings.Repeat("x", 3000)
	for _, hint := range []int64{-1, 0, 1, 2999, 3000, 3001, 10000, 1 << 40} {
		for _, slow := range []bool{false, true} {
			var r io.Reader = strings.NewReader(body)
			if slow {
				r = iotest.OneByteReader(r)
			}
			got, err := readAllSized(r, hint, 1<<20)
			if err != nil || !bytes.Equal(got, []byte(body)) {
				t.Fatalf("hint %d (one byte at a time: %v): %d bytes, %v", hint, slow, len(got), err)
			}
		}
	}
	if _, err := readAllSized(iotest.ErrReader(io.ErrUnexpectedEOF), 10, 100); err != io.ErrUnexpectedEOF {
		t.Fatalf("a failing reader: %v", err)
	}
}
