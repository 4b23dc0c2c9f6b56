package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/wal"
)

// The server's own CPU and allocations per request, without the network
// or a client (cmd/bench measures those): compare runs with benchstat.
// The store is on a RAM file system where the machine has one (benchDir),
// so that ns/op is CPU and not a disk's fsync; without the spare segments
// (zeros written ahead, a disk's concern) and the checkpoints (which a
// few seconds' run on a disk does not reach).

func benchServer(b *testing.B) *Server {
	b.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := engine.Open(benchDir(b), engine.Options{CheckpointLogBytes: -1,
		WAL: wal.Options{NoPreallocation: true}, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	svc, err := receipt.Open(context.Background(), db, receipt.Options{MaintainInterval: -1, CleanInterval: -1, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	s := New(svc, Options{Logger: quiet})
	if w := serve(s, "PUT", "/v1/tables/t", ""); w.Code != http.StatusCreated {
		b.Fatalf("create table: %d %s", w.Code, w.Body)
	}
	return s
}

// benchRAMDir is a tmpfs on Linux: an fsync there costs no disk wait.
// memfs is not used instead: its own copying on every write and sync would
// be most of the profile.
const benchRAMDir = "/dev/shm"

// benchDir is a fresh directory on benchRAMDir, or the test's temporary
// directory where there is none.
func benchDir(b *testing.B) string {
	dir, err := os.MkdirTemp(benchRAMDir, "idem-api-bench-")
	if err != nil {
		return b.TempDir()
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func serve(s *Server, method, path, body string, headers ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// serveLean is serve without httptest's costs, which are not a server's:
// the request is built as net/http's server builds one (no bufio.Reader
// per request) and the answer is counted, not recorded. It returns the
// status.
func serveLean(s *Server, method, path string, body []byte, headers ...string) int {
	r, err := http.NewRequest(method, path, bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	r.RemoteAddr, r.RequestURI = "192.0.2.1:1234", path
	if len(body) > 0 {
		r.Header["Content-Type"] = []string{"application/json"}
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header[headers[i]] = []string{headers[i+1]}
	}
	w := &benchWriter{header: http.Header{}}
	s.ServeHTTP(w, r)
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// benchWriter is a ResponseWriter that keeps the status and drops the body.
type benchWriter struct {
	header http.Header
	status int
}

func (w *benchWriter) Header() http.Header { return w.header }
func (w *benchWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(b), nil
}

// SetReadDeadline and SetWriteDeadline are there as on net/http's writer,
// which http.ResponseController reaches (readBody sets a body deadline).
func (w *benchWriter) SetReadDeadline(time.Time) error  { return nil }
func (w *benchWriter) SetWriteDeadline(time.Time) error { return nil }

func (w *benchWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

// benchBatchDocs and benchDocJSON are the http suite's batch: 10
// documents of about 190 bytes.
const benchBatchDocs = 10

var benchDocJSON = `{"n":1,"pad":"` + strings.Repeat("p", 160) + `"}`

func benchDocID(i int) string { return "d" + string(rune('a'+i)) }

// benchBatch is the batch as the body of the batch route.
func benchBatch() string {
	var b strings.Builder
	b.WriteString(`{"inserts":[`)
	for i := range benchBatchDocs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":"` + benchDocID(i) + `","doc":` + benchDocJSON + `}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// BenchmarkServer_ReplayPOST: a keyed POST whose receipt is terminal —
// decode, fingerprint, lookup, the stored envelope written back.
func BenchmarkServer_ReplayPOST(b *testing.B) {
	s := benchServer(b)
	body := benchBatch()
	if w := serve(s, "POST", "/v1/tables/t/batch", body, "Idempotency-Key", "k"); w.Code != http.StatusCreated {
		b.Fatalf("first POST: %d %s", w.Code, w.Body)
	}
	b.ReportAllocs()
	for b.Loop() {
		if w := serve(s, "POST", "/v1/tables/t/batch", body, "Idempotency-Key", "k"); w.Code != http.StatusCreated {
			b.Fatalf("replay: %d", w.Code)
		}
	}
}

// BenchmarkServer_Healthz: the floor of an answer through the server's
// routing, metrics and problem-free path.
func BenchmarkServer_Healthz(b *testing.B) {
	s := benchServer(b)
	b.ReportAllocs()
	for b.Loop() {
		if w := serve(s, "GET", "/healthz", ""); w.Code != http.StatusOK {
			b.Fatalf("healthz: %d", w.Code)
		}
	}
}

// BenchmarkServer_KeyedPOST: a keyed POST with a new key — decode, the
// receipt created terminal with the batch in one write, the envelope
// written — through the server on an engine in a temporary directory.
func BenchmarkServer_KeyedPOST(b *testing.B) {
	s := benchServer(b)
	body := benchBatch()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if w := serve(s, "POST", "/v1/tables/t/batch", body, "Idempotency-Key", "k"+strconv.Itoa(i)); w.Code != http.StatusCreated {
			b.Fatalf("POST: %d %s", w.Code, w.Body)
		}
	}
}

// benchParallelism is the requests in flight per GOMAXPROCS in the
// parallel benchmarks: 32 × 2 cores, as cmd/bench's keyed@64, so that the
// WAL's group commit gathers as it does under load.
const benchParallelism = 32

// BenchmarkKeyedOverhead is what the handler adds to a keyed request:
// "library" executes the decoded batch as cmd/bench's library keyed case
// does, "http" serves the same batch's JSON body through ServeHTTP (body
// read, digest, the verbatim-replay lookup, decode into canonical form,
// routing, auth, metrics, the answer). The difference of their ns/op is
// the handler's own CPU; net/http's and the client's are cmd/bench's.
func BenchmarkKeyedOverhead(b *testing.B) {
	body := []byte(benchBatch())
	b.Run("library", func(b *testing.B) {
		s := benchServer(b)
		var inserts []table.Insert // the body's documents as cmd/bench builds them: raw JSON
		for i := range benchBatchDocs {
			inserts = append(inserts, table.Insert{ID: benchDocID(i), Doc: json.RawMessage(benchDocJSON)})
		}
		runOverhead(b, func(n uint64) {
			batch := &table.Batch{Inserts: slices.Clone(inserts)}
			key := "k" + strconv.FormatUint(n, 10)
			a, err := s.svc.Execute(context.Background(), receipt.Request{Principal: Anonymous, Table: "t", Key: key, Batch: batch})
			if err != nil || a.Status != http.StatusCreated {
				b.Fatalf("Execute: %d %v", a.Status, err)
			}
		})
	})
	b.Run("http", func(b *testing.B) {
		s := benchServer(b)
		runOverhead(b, func(n uint64) {
			key := "k" + strconv.FormatUint(n, 10)
			if st := serveLean(s, "POST", "/v1/tables/t/batch", body, "Idempotency-Key", key); st != http.StatusCreated {
				b.Fatalf("POST: %d", st)
			}
		})
	})
}

// benchReplayKeys is how many terminal receipts BenchmarkReplayOverhead
// replays, round robin: enough that the lookups are not of one hot key.
const benchReplayKeys = 1024

// BenchmarkReplayOverhead is BenchmarkKeyedOverhead for a retry of a
// terminal receipt: "library" executes the decoded batch again under its
// key, as cmd/bench's library replay case does, "http" serves the same
// body with the same key through ServeHTTP (body read, digest, the
// verbatim-replay lookup, routing, auth, metrics, the stored answer). The
// difference of their ns/op is the handler's own CPU on a replay.
func BenchmarkReplayOverhead(b *testing.B) {
	body := []byte(benchBatch())
	var inserts []table.Insert
	for i := range benchBatchDocs {
		inserts = append(inserts, table.Insert{ID: benchDocID(i), Doc: json.RawMessage(benchDocJSON)})
	}
	keys := make([]string, benchReplayKeys)
	setup := func(b *testing.B) *Server {
		s := benchServer(b)
		for i := range keys {
			keys[i] = "k" + strconv.Itoa(i)
			if st := serveLean(s, "POST", "/v1/tables/t/batch", body, "Idempotency-Key", keys[i]); st != http.StatusCreated {
				b.Fatalf("first POST: %d", st)
			}
		}
		b.ResetTimer() // the receipts made above are not the benchmark's allocations
		return s
	}
	b.Run("library", func(b *testing.B) {
		s := setup(b)
		runOverhead(b, func(n uint64) {
			batch := &table.Batch{Inserts: slices.Clone(inserts)}
			key := keys[n%benchReplayKeys]
			a, err := s.svc.Execute(context.Background(), receipt.Request{Principal: Anonymous, Table: "t", Key: key, Batch: batch})
			if err != nil || a.Status != http.StatusCreated || !a.Replayed {
				b.Fatalf("Execute: %d replayed=%v %v", a.Status, a.Replayed, err)
			}
		})
	})
	b.Run("http", func(b *testing.B) {
		s := setup(b)
		runOverhead(b, func(n uint64) {
			key := keys[n%benchReplayKeys]
			if st := serveLean(s, "POST", "/v1/tables/t/batch", body, "Idempotency-Key", key); st != http.StatusCreated {
				b.Fatalf("replay: %d", st)
			}
		})
	})
}

// runOverhead runs op as the overhead benchmarks do: benchParallelism
// goroutines per core, allocations and CPU per op reported; n numbers
// each call from 1 on.
func runOverhead(b *testing.B, op func(n uint64)) {
	var seq atomic.Uint64
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	testsupport.ReportCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			op(seq.Add(1))
		}
	})
}
