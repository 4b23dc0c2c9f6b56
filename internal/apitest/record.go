// Package apitest is test support for Idem's HTTP API: an HTTP client whose
// transport RECORDS every exchange a test makes, and helpers that start
// idemd processes.
//
// The recorded exchanges are the API's contract evidence: with
// IDEM_CONTRACT_DIR set, each exchange is appended as one JSON line
// (Record) to a file in that directory, and the contract module
// (contract/, its own go.mod, with kin-openapi) checks every record against
// api/openapi.yaml in a second step (`make test` runs both). Without the
// variable nothing is written; the tests' own assertions still run. The
// split keeps kin-openapi out of the root go.mod, so that a program linking
// engine or receipt does not get it in its module graph.
package apitest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// EnvDir names the environment variable holding the directory records are
// written to; unset or empty, nothing is recorded.
const EnvDir = "IDEM_CONTRACT_DIR"

// Kinds of record.
const (
	// KindExchange is a request and the response it got.
	KindExchange = "exchange"
	// KindUnparsable is the answer to a request the HTTP layer could not
	// parse (it never reached a route): no request is recorded.
	KindUnparsable = "unparsable"
)

// Record is one recorded exchange, a line of a .jsonl file. Bodies are
// base64 in the JSON (encoding/json's []byte), so any bytes survive.
type Record struct {
	Kind    string `json:"kind"`
	Package string `json:"package"` // the test binary's working directory, relative to the module root
	Test    string `json:"test"`    // t.Name() of the test that made the exchange

	Method        string      `json:"method,omitempty"`
	URI           string      `json:"uri,omitempty"` // escaped path and query, as sent
	RequestHeader http.Header `json:"request_header,omitempty"`
	RequestBody   []byte      `json:"request_body,omitempty"`

	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
}

// Recorder appends a test's records to one file of the contract directory
// and counts them (it counts with recording off, too). Safe for concurrent
// use.
type Recorder struct {
	t    testing.TB
	path string // "" = recording off

	mu       sync.Mutex
	n        atomic.Int64
	reported bool
}

var (
	fileSeq atomic.Int64
	pkgOnce sync.Once
	pkgName string
)

// pkg names the test binary's package: its working directory relative to
// the module root (e.g. "api", "cmd/idemd", "harness").
func pkg() string {
	pkgOnce.Do(func() {
		wd, err := os.Getwd()
		if err != nil {
			pkgName = "unknown"
			return
		}
		pkgName = filepath.Base(wd)
		if root, err := ModuleRoot(); err == nil {
			if rel, err := filepath.Rel(root, wd); err == nil {
				pkgName = filepath.ToSlash(rel)
			}
		}
	})
	return pkgName
}

// newRecorder returns a recorder for t's exchanges, writing to a file of
// its own under $IDEM_CONTRACT_DIR (created on the first record) when the
// variable is set.
func newRecorder(t testing.TB) *Recorder {
	r := &Recorder{t: t}
	if dir := os.Getenv(EnvDir); dir != "" {
		name := fmt.Sprintf("%s.%s-%d-%d.jsonl", sanitize(pkg()), sanitize(t.Name()), os.Getpid(), fileSeq.Add(1))
		r.path = filepath.Join(dir, name)
	}
	return r
}

// sanitize makes s usable as a file name.
func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

// Record appends rec (its Package and Test filled in) and counts it. A
// write failure fails the test: a lost record is an unchecked exchange.
func (r *Recorder) Record(rec Record) {
	if rec.Kind == "" {
		rec.Kind = KindExchange
	}
	rec.Package = pkg()
	if rec.Test == "" {
		rec.Test = r.t.Name()
	}
	r.n.Add(1)
	if r.path == "" {
		return
	}
	line, err := json.Marshal(rec)
	if err == nil {
		line = append(line, '\n')
		r.mu.Lock()
		err = appendFile(r.path, line)
		r.mu.Unlock()
	}
	if err != nil {
		r.mu.Lock()
		first := !r.reported
		r.reported = true
		r.mu.Unlock()
		if first {
			r.t.Errorf("apitest: recording %s %s for the contract check: %v", rec.Method, rec.URI, err)
		}
	}
}

func appendFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return errors.Join(err, f.Close())
}

// Recorded is how many exchanges r has recorded (counted when recording is
// off too).
func (r *Recorder) Recorded() int64 { return r.n.Load() }

// RecordExchange records an exchange a test made without a Client (with
// an httptest.ResponseRecorder, say), for the contract check.
func RecordExchange(t testing.TB, req *http.Request, reqBody []byte, status int, header http.Header, body []byte) {
	newRecorder(t).Record(Record{Method: req.Method, URI: req.URL.RequestURI(), RequestHeader: req.Header.Clone(),
		RequestBody: reqBody, Status: status, Header: header.Clone(), Body: body})
}

// RecordUnparsable records the answer to a request the HTTP layer could
// not parse; the contract check holds it to the spec's Unparsable
// response.
func RecordUnparsable(t testing.TB, status int, header http.Header, body []byte) {
	newRecorder(t).Record(Record{Kind: KindUnparsable, Status: status, Header: header.Clone(), Body: body})
}

// ModuleRoot finds the directory of the idem module's go.mod, walking up
// from the working directory (a test's package directory). The go.mod of a
// nested module (harness, cmd/bench, contract: see go.work) is passed over.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresModule(mod, rootModule) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("apitest: no go.mod of " + rootModule + " at or above the working directory")
		}
		dir = parent
	}
}

// rootModule is the module whose tree holds api/openapi.yaml and cmd/idemd.
const rootModule = "github.com/idemdb/idem"

// declaresModule reports whether go.mod text declares module path.
func declaresModule(gomod []byte, path string) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == path {
			return true
		}
	}
	return false
}

// Unrecorded is a recorder that counts exchanges and records none: for a
// client whose answers a test fabricates on purpose (a proxy replacing an
// owner's body, say), which the contract check must not hold to the spec.
func Unrecorded(t testing.TB) *Recorder { return &Recorder{t: t} }
