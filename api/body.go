package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/idemdb/idem/code"
)

// bodies reads request bodies within Options.BodyBytesMax and
// Options.BodyTimeout.
type bodies struct{ opts *Options }

// readBody reads at most BodyBytesMax bytes of a JSON body within
// BodyTimeout; a larger body is answered 413, a slower one 408, one whose
// Content-Type is not JSON 415.
func (s *bodies) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)) // not every writer (a test's) has a connection
	body, err := readAllSized(s.bodyReader(w, r), r.ContentLength, s.opts.BodyBytesMax)
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		return nil, s.refuseBody(w, err)
	}
	if ct := r.Header.Get("Content-Type"); len(body) > 0 && !isJSON(ct) {
		msg := fmt.Sprintf("the body must be JSON (Content-Type application/json or application/*+json), not %q", ct)
		if ct == "" {
			msg = "a body needs Content-Type: application/json"
		}
		writeProblem(w, code.UnsupportedMedia, msg)
		return nil, false
	}
	return body, true
}

// refuseBody answers a body readBody could not read (err is not nil) and
// returns false. It is apart from readBody so that the errors.As target
// escapes only on this path: declared in readBody, it cost every request
// an allocation.
func (s *bodies) refuseBody(w http.ResponseWriter, err error) bool {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeProblem(w, code.PayloadTooLarge, "request body exceeds "+strconv.FormatInt(s.opts.BodyBytesMax, 10)+" bytes")
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The connection's read side is past its deadline: it cannot
		// carry another request.
		w.Header().Set("Connection", "close")
		writeProblem(w, code.RequestTimeout, "the request body did not arrive within "+s.opts.BodyTimeout.String())
	default:
		writeProblem(w, code.InvalidRequest, "reading the request body failed")
	}
	return false
}

// bodyReader is r's body bounded by BodyBytesMax. A body whose
// Content-Length is within the bound needs no MaxBytesReader: net/http
// reads no byte past the length, and readAllSized refuses more than max
// from a reader that would (a request built in-process). A larger or
// unannounced (chunked) one goes through it: past the bound it answers
// 413 and has the connection closed, its rest unread.
func (s *bodies) bodyReader(w http.ResponseWriter, r *http.Request) io.Reader {
	if r.ContentLength > 0 && r.ContentLength <= s.opts.BodyBytesMax {
		return r.Body
	}
	return http.MaxBytesReader(w, r.Body, s.opts.BodyBytesMax)
}

// readAllSized is io.ReadAll with the buffer sized once from the
// request's Content-Length (when it is within max), instead of grown from
// 512 bytes with a copy at each doubling. The length is only a hint: more
// is read if it comes, up to max (then *http.MaxBytesError).
func readAllSized(r io.Reader, hint, max int64) ([]byte, error) {
	if hint <= 0 || hint > max {
		return io.ReadAll(r)
	}
	b := takeBodyBuf(hint + 1) // +1: EOF is seen without growing (bodypool.go)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > max {
			return b, &http.MaxBytesError{Limit: max}
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than announced: grow as ReadAll would
		}
	}
}

// isJSON reports whether a Content-Type names JSON: application/json or
// any application/*+json, parameters (charset) allowed. A body without a
// Content-Type is not: curl -d, for one, would otherwise pass a form for
// JSON; every client of ours says what it sends.
func isJSON(contentType string) bool {
	if contentType == "application/json" {
		return true // what every client of ours sends: no parsing
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}
