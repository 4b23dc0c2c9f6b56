package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// batch serves POST /v1/tables/{table}/batch. Without Idempotency-Key it is
// the fast path (one atomic batch, no receipt); with it, the keyed flow.
// Malformed input is answered 400 before any receipt exists, so a corrected
// retry with the same key works.
func (s *Server) batch(w http.ResponseWriter, r *http.Request) {
	keys, keyed := r.Header[http.CanonicalHeaderKey(headerIdempotencyKey)]
	key := ""
	if keyed {
		key = keys[0]
		if len(keys) != 1 || !receipt.ValidKey(key) {
			writeProblem(w, code.InvalidKey, "Idempotency-Key must be one header of 1..255 visible ASCII characters")
			return
		}
		// Echo the key on every answer of the keyed route, including the
		// 400 and 413 answers given before a receipt exists.
		w.Header().Set(headerIdempotencyKey, key)
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	b, err := table.DecodeBatch(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tbl := r.PathValue("table")
	if !keyed {
		res, err := s.svc.ExecuteFast(r.Context(), principalOf(r.Context()), tbl, b)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusCreated, res)
		return
	}
	wait := preferWait(r.Header.Values("Prefer"))
	ans, err := s.svc.Execute(r.Context(), receipt.Request{
		Principal: principalOf(r.Context()), Table: tbl, Key: key, Batch: b, Wait: wait,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if wait > 0 {
		w.Header().Set("Preference-Applied", "wait="+strconv.Itoa(int(wait/time.Second)))
	}
	s.metrics.keyed(ans)
	writeAnswer(w, key, ans)
}

// preferWaitMax bounds the wait a client may ask for before the service's
// own WaitMax applies.
const preferWaitMax = time.Hour

// preferWait parses RFC 7240 `Prefer: wait=N` (seconds).
func preferWait(values []string) time.Duration {
	for _, v := range values {
		for _, pref := range strings.Split(v, ",") {
			name, val, ok := strings.Cut(strings.TrimSpace(pref), "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			val, _, _ = strings.Cut(val, ";")
			n, err := strconv.Atoi(strings.Trim(strings.TrimSpace(val), `"`))
			if err != nil || n < 0 {
				continue
			}
			return min(time.Duration(n)*time.Second, preferWaitMax)
		}
	}
	return 0
}
