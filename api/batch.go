package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// batchRoute serves the batch route, keyed or not, forwarding a keyed
// request to the node that holds its receipt.
type batchRoute struct {
	svc      *receipt.Service // shard 0's: -wait-max
	shardMap *shardMap
	bodies   *bodies
	failures *failures
	peers    *peers
	metrics  *metrics
}

// batch serves POST /v1/tables/{table}/batch. Without Idempotency-Key it is
// the fast path (one atomic batch, no receipt); with it, the keyed flow.
// Malformed input is answered 400 before any receipt exists, so a corrected
// retry with the same key works.
func (s *batchRoute) batch(w http.ResponseWriter, r *http.Request) {
	values, keyed := r.Header[http.CanonicalHeaderKey(headerIdempotencyKey)]
	key := ""
	hs := headerSlotsFor(r)
	if keyed {
		var err error
		if key, err = parseIdempotencyKey(values); err != nil {
			writeProblem(w, code.InvalidKey, err.Error())
			return
		}
		// Echo the key, as the client wrote it, on every answer of the keyed
		// route, including the 400 and 413 answers given before a receipt
		// exists: that makes each of them a keyed answer.
		hs.set(w.Header(), headerIdempotencyKey, strings.Trim(values[0], " \t"))
	}
	body, ok := s.bodies.readBody(w, r)
	if !ok {
		return
	}
	if !keyed {
		s.fastBatch(w, r, body)
		recycleBody(body)
		return
	}
	s.keyedBatch(w, r, hs, key, body)
	if !s.peers.mayForward(r) { // else a forward's transport may still read it
		recycleBody(body)
	}
}

// fastBatch runs a batch without a key: no receipt, no replay.
func (s *batchRoute) fastBatch(w http.ResponseWriter, r *http.Request, body []byte) {
	b, err := table.DecodeBatch(body)
	if err != nil {
		s.failures.writeError(w, r, err)
		return
	}
	tbl := r.PathValue("table")
	res, err := s.shardMap.shardFor(r, tbl).ExecuteFast(r.Context(), principalOf(r.Context()), tbl, b)
	if err != nil {
		s.failures.writeError(w, r, err)
		return
	}
	// The bytes writeJSON's encoder would write (three integers), without
	// an encoder and its reflection on every batch.
	out := res.AppendJSON(make([]byte, 0, len(`{"inserted":,"deleted":,"transformed":}`)+3*20))
	writeBody(w, http.StatusCreated, "application/json", out)
}

// keyedBatch runs a keyed batch: a verbatim replay before any decode,
// else the receipt service, forwarded to the receipt's live owner when
// another node holds it.
func (s *batchRoute) keyedBatch(w http.ResponseWriter, r *http.Request, hs *headerSlots, key string, body []byte) {
	firstSent, err := parseFirstSent(r.Header.Values(headerFirstSent))
	if err != nil {
		writeProblem(w, code.InvalidRequest, err.Error())
		return
	}
	wait, asked := preferWait(r.Header.Values("Prefer"))
	wait = min(wait, s.svc.WaitMax())
	principal, tbl := principalOf(r.Context()), r.PathValue("table")
	svc := s.shardMap.shardFor(r, tbl)
	answer := func(ans receipt.Answer) {
		if asked {
			// The wait granted, which -wait-max may have cut, on every
			// answer to a request that asked: an answer that came sooner
			// was still given under that bound.
			hs.set(w.Header(), "Preference-Applied", "wait="+strconv.Itoa(int(wait/time.Second)))
		}
		s.metrics.keyed(ans)
		writeAnswerWith(w, hs, ans)
	}
	// The same bytes as the receipt's request replay without a decode.
	digest := receipt.BodyDigest(body)
	ans, replayed, seen := svc.ReplayVerbatimOrSeen(r.Context(), principal, tbl, key, firstSent, digest)
	if replayed {
		answer(ans)
		return
	}
	b, err := table.DecodeBatch(body)
	if err != nil {
		s.failures.writeError(w, r, err)
		return
	}
	req := receipt.Request{Principal: principal, Table: tbl, Key: key, Batch: b, Wait: wait, FirstSent: firstSent, BodyDigest: digest, Seen: seen}
	ans, forwarded, err := s.executeOrForward(w, r, svc, req, body)
	if forwarded {
		return
	}
	if err != nil {
		// The failure came after the key was bound, so its transaction is
		// known; its outcome is not (a retry with the same key learns it).
		txnID := receipt.Bind(principal, tbl, key)
		w.Header().Set(headerTxnID, txnID)
		writeTxnProblem(w, s.failures.classify(r, err), txnID)
		return
	}
	s.failures.noteRefusal(ans.Code)
	answer(ans)
}

// executeOrForward executes req here, on svc (its shard's), or, when
// another live node holds its receipt, forwards it there (forwarded: that
// node's answer is written).
func (s *batchRoute) executeOrForward(w http.ResponseWriter, r *http.Request, svc *receipt.Service, req receipt.Request, body []byte) (receipt.Answer, bool, error) {
	wait := req.Wait
	forwarding := s.peers.mayForward(r)
	if forwarding {
		// Learn first, without waiting, whether another node holds the
		// receipt: then that node answers, waiting there if asked to.
		req.Wait = 0
	}
	ans, err := svc.Execute(r.Context(), req)
	if forwarding && err == nil && !ans.Terminal {
		if ans.Code == code.RequestInProgress && ans.Holder.Node != "" &&
			s.peers.forward(w, r, svc, body, ans.Holder, wait, receipt.Bind(req.Principal, req.Table, req.Key)) {
			return ans, true, nil
		}
		if wait > 0 { // not forwarded: wait here, as without forwarding
			req.Wait, req.Seen = wait, receipt.Seen{} // what was seen before is stale now
			ans, err = svc.Execute(r.Context(), req)
		}
	}
	return ans, false, err
}

// headerFirstSent is Azure's Repeatability-First-Sent (an HTTP-date): when
// the client first sent this request.
const headerFirstSent = "Repeatability-First-Sent"

// parseFirstSent reads Repeatability-First-Sent: one HTTP-date (the
// service refuses one in the future); zero when absent.
func parseFirstSent(values []string) (time.Time, error) {
	switch len(values) {
	case 0:
		return time.Time{}, nil
	case 1:
	default:
		return time.Time{}, fmt.Errorf("%s: one value, not %d", headerFirstSent, len(values))
	}
	t, err := http.ParseTime(strings.TrimSpace(values[0]))
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: want an HTTP-date such as %q", headerFirstSent, values[0], "Tue, 01 Dec 2026 10:00:00 GMT")
	}
	return t, nil
}

// preferWaitMax bounds the wait a client may ask for before the service's
// own WaitMax applies; it keeps the conversion to a Duration from
// overflowing.
const preferWaitMax = time.Hour

// preferWait parses RFC 7240 `Prefer: wait=N` (seconds) and reports whether
// the request asked for a wait.
func preferWait(values []string) (time.Duration, bool) {
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
			return time.Duration(min(n, int(preferWaitMax/time.Second))) * time.Second, true
		}
	}
	return 0, false
}
