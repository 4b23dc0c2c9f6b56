package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
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

// A body that says it is within the bound but is not (a request built in
// process, whose reader net/http does not limit to its Content-Length) is
// still refused past the bound, as MaxBytesReader would refuse it.
func TestReadAllSized_BoundsALyingContentLength(t *testing.T) {
	const max = 1000
	for _, size := range []int{max, max + 1, 5 * max} {
		got, err := readAllSized(strings.NewReader(strings.Repeat("x", size)), 10, max)
		var tooBig *http.MaxBytesError
		if want := size > max; errors.As(err, &tooBig) != want || (!want && len(got) != size) {
			t.Errorf("%d bytes announced as 10, bound %d: %d bytes, %v", size, max, len(got), err)
		}
	}
}
