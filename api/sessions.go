package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// Interactive sessions (docs/design.md §14): begin, stage, read own writes, commit
// (a keyed answer, through the receipt lifecycle) and abort. A step on a
// session another live node holds is forwarded there, as a keyed request
// on a receipt held elsewhere is.

// sessionRoutes serve the /v1/sessions routes but the session's
// receipt (tables.go).
type sessionRoutes struct {
	svc      *receipt.Service // shard 0's: -wait-max, -session-ttl-max
	shardMap *shardMap
	bodies   *bodies
	failures *failures
	peers    *peers
	metrics  *metrics
}

// sessionJSON is a session as the API reports it.
type sessionJSON struct {
	ID            string       `json:"session_id"`
	State         string       `json:"state"`
	Reason        string       `json:"reason,omitempty"`
	Created       time.Time    `json:"created_at"`
	Expires       time.Time    `json:"expires_at"`
	Stages        int          `json:"stages"`
	Documents     int          `json:"documents"`
	Writes        int          `json:"writes"`
	Result        table.Result `json:"result"`
	Commit        *commitJSON  `json:"commit,omitempty"`
	RetainedUntil *time.Time   `json:"retained_until,omitempty"`
	Staged        []stagedJSON `json:"staged,omitempty"` // a stage step's answer only
}

type commitJSON struct {
	Key           string `json:"idempotency_key"`
	TransactionID string `json:"transaction_id"`
	// Outcome is the commit's: committed, aborted, not_applied, pending
	// (omitted once its receipt is gone); Code when it did not commit.
	Outcome string `json:"outcome,omitempty"`
	Code    string `json:"code,omitempty"`
}

// stagedJSON is what one table's batch of a stage step did.
type stagedJSON struct {
	Table string `json:"table"`
	table.Result
}

func sessionOut(s receipt.Session) sessionJSON {
	out := sessionJSON{ID: s.ID, State: s.State.String(), Reason: s.Reason, Created: s.Created.UTC(), Expires: s.Expires.UTC(),
		Stages: s.Stages, Documents: s.Docs, Writes: s.Writes, Result: s.Result}
	if s.TxnID != "" {
		out.Commit = &commitJSON{Key: s.Key, TransactionID: s.TxnID, Outcome: s.Outcome, Code: string(s.Code)}
	}
	if !s.Retained.IsZero() {
		r := s.Retained.UTC()
		out.RetainedUntil = &r
	}
	return out
}

// beginJSON is the optional body of POST /v1/sessions. Table is the
// session's first table, which pins it to that table's store shard
// (shardroute.go); without it a sharded deployment takes the shard of
// (principal, "").
type beginJSON struct {
	TTLSeconds *int    `json:"ttl_seconds"`
	Table      *string `json:"table"`
}

// beginSession serves POST /v1/sessions.
func (s *sessionRoutes) beginSession(w http.ResponseWriter, r *http.Request) {
	body, ok := s.bodies.readBody(w, r)
	if !ok {
		return
	}
	var req beginJSON
	if len(body) > 0 {
		if err := strictJSON(body, &req); err != nil {
			writeProblem(w, code.InvalidRequest, `body must be {"ttl_seconds": n, "table": "t"} (both optional) or empty: `+err.Error())
			return
		}
	}
	var ttl time.Duration
	if req.TTLSeconds != nil {
		max := int(s.svc.SessionTTLMax() / time.Second)
		if *req.TTLSeconds < 1 || *req.TTLSeconds > max {
			writeProblem(w, code.InvalidRequest, fmt.Sprintf("ttl_seconds must be an integer in 1..%d", max))
			return
		}
		ttl = time.Duration(*req.TTLSeconds) * time.Second
	}
	first := ""
	if req.Table != nil {
		if !table.ValidTableName(*req.Table) {
			writeProblem(w, code.InvalidRequest, fmt.Sprintf("table must be a table name (1..%d of A-Z a-z 0-9 _ -)", table.TableNameBytesMax))
			return
		}
		first = *req.Table
	}
	sess, err := s.shardMap.shardFor(r, first).BeginSession(r.Context(), principalOf(r.Context()), ttl)
	if err != nil {
		s.failures.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+sess.ID)
	writeJSON(w, http.StatusCreated, sessionOut(sess))
}

// getSession serves GET /v1/sessions/{id}: any node answers from the store.
func (s *sessionRoutes) getSession(w http.ResponseWriter, r *http.Request) {
	svc, _, ok := s.shardMap.sessionShard(w, r)
	if !ok {
		return
	}
	sess, err := svc.SessionInfo(r.Context(), principalOf(r.Context()), r.PathValue("id"))
	if err != nil {
		s.failures.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionOut(sess))
}

// stageSession serves POST /v1/sessions/{id}/batch. The body is one
// table's batch with its table named — {"table": "t", "inserts": …} — or
// several: {"tables": {"t": {…}, "u": {…}}}, staged in the order of their
// names, all or none.
func (s *sessionRoutes) stageSession(w http.ResponseWriter, r *http.Request) {
	body, ok := s.bodies.readBody(w, r)
	if !ok {
		return
	}
	batches, cerr := decodeStage(body)
	if cerr != nil {
		writeCodeError(w, cerr)
		return
	}
	svc, k, ok := s.shardMap.sessionShard(w, r)
	if !ok {
		return
	}
	for _, tb := range batches {
		if cerr := s.shardMap.crossShard(r, k, tb.Table); cerr != nil {
			writeCodeError(w, cerr)
			return
		}
	}
	res, sess, err := svc.StageSession(r.Context(), principalOf(r.Context()), r.PathValue("id"), batches)
	if err != nil {
		s.writeSessionError(w, r, svc, body, err)
		return
	}
	out := sessionOut(sess)
	for i, tb := range batches {
		out.Staged = append(out.Staged, stagedJSON{Table: tb.Table, Result: res[i]})
	}
	writeJSON(w, http.StatusOK, out)
}

// decodeStage reads a stage step's body (stageSession).
func decodeStage(body []byte) ([]receipt.TableBatch, *code.Error) {
	var head struct {
		Table  *string                    `json:"table"`
		Tables map[string]json.RawMessage `json:"tables"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return nil, code.Errorf(code.InvalidRequest, "body must be a JSON object: %v", err)
	}
	switch {
	case head.Table != nil && head.Tables != nil:
		return nil, code.Errorf(code.InvalidRequest, `give either "table" with one batch or "tables", not both`)
	case head.Table != nil:
		b, err := decodeTableBatch(stripTable(body))
		if err != nil {
			return nil, err
		}
		return []receipt.TableBatch{{Table: *head.Table, Batch: b}}, nil
	case len(head.Tables) == 0:
		return nil, code.Errorf(code.InvalidRequest, `name the table: {"table": "t", "inserts": …} or {"tables": {"t": {…}}}`)
	case len(head.Tables) > receipt.StageBatchesMax:
		return nil, code.Errorf(code.InvalidRequest, "a step stages at most %d tables' batches", receipt.StageBatchesMax)
	}
	names := make([]string, 0, len(head.Tables))
	for name := range head.Tables {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]receipt.TableBatch, 0, len(names))
	for _, name := range names {
		b, err := decodeTableBatch(head.Tables[name])
		if err != nil {
			return nil, code.Errorf(err.Code, "tables[%s]: %s", strconv.Quote(name), err.Message)
		}
		out = append(out, receipt.TableBatch{Table: name, Batch: b})
	}
	return out, nil
}

// stripTable removes the top-level "table" member from a one-table step's
// body, so that the rest decodes as the strict batch it is.
func stripTable(body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	delete(m, "table")
	out, _ := json.Marshal(m)
	return out
}

func decodeTableBatch(raw []byte) (*table.Batch, *code.Error) {
	b, err := table.DecodeBatch(raw)
	var ce *code.Error
	if errors.As(err, &ce) {
		return nil, ce
	}
	if err != nil {
		return nil, code.Errorf(code.InvalidRequest, "%v", err)
	}
	return b, nil
}

// readSessionDoc serves GET /v1/sessions/{id}/tables/{table}/docs/{doc}.
func (s *sessionRoutes) readSessionDoc(w http.ResponseWriter, r *http.Request) {
	id, tbl := r.PathValue("doc"), r.PathValue("table")
	svc, k, ok := s.shardMap.sessionShard(w, r)
	if !ok {
		return
	}
	if cerr := s.shardMap.crossShard(r, k, tbl); cerr != nil {
		writeCodeError(w, cerr)
		return
	}
	doc, err := svc.ReadSession(r.Context(), principalOf(r.Context()), r.PathValue("id"), tbl, id)
	if err != nil {
		s.writeSessionError(w, r, svc, nil, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		ID  string          `json:"id"`
		Doc json.RawMessage `json:"doc"`
	}{id, doc})
}

// abortSession serves DELETE /v1/sessions/{id}.
func (s *sessionRoutes) abortSession(w http.ResponseWriter, r *http.Request) {
	svc, _, ok := s.shardMap.sessionShard(w, r)
	if !ok {
		return
	}
	sess, err := svc.AbortSession(r.Context(), principalOf(r.Context()), r.PathValue("id"))
	if err != nil {
		s.writeSessionError(w, r, svc, nil, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionOut(sess))
}

// commitSession serves POST /v1/sessions/{id}/commit: a keyed answer,
// under the request's Idempotency-Key or, without one, the session ID.
func (s *sessionRoutes) commitSession(w http.ResponseWriter, r *http.Request) {
	key := ""
	if values, keyed := r.Header[http.CanonicalHeaderKey(headerIdempotencyKey)]; keyed {
		var err error
		if key, err = parseIdempotencyKey(values); err != nil {
			writeProblem(w, code.InvalidKey, err.Error())
			return
		}
		w.Header().Set(headerIdempotencyKey, strings.Trim(values[0], " \t"))
	} else if id := r.PathValue("id"); receipt.ValidSessionID(id) {
		// Without a key the session ID is the commit's key: the answer is
		// keyed all the same, and says so.
		w.Header().Set(headerIdempotencyKey, id)
	}
	body, ok := s.bodies.readBody(w, r)
	if !ok {
		return
	}
	if len(bytes.TrimSpace(body)) > 0 && string(bytes.TrimSpace(body)) != "{}" {
		writeProblem(w, code.InvalidRequest, "a commit has no body (or {})")
		return
	}
	svc, _, ok := s.shardMap.sessionShard(w, r)
	if !ok {
		return
	}
	wait, asked := preferWait(r.Header.Values("Prefer"))
	wait = min(wait, s.svc.WaitMax())
	req := receipt.CommitRequest{Principal: principalOf(r.Context()), Session: r.PathValue("id"), Key: key, Wait: wait}
	forwarding := s.peers.mayForward(r)
	if forwarding {
		req.Wait = 0
	}
	ans, err := svc.CommitSession(r.Context(), req)
	if forwarding && err == nil && !ans.Terminal && ans.Code == code.RequestInProgress && ans.Holder.Node != "" {
		if s.peers.forward(w, r, svc, body, ans.Holder, wait, receipt.Bind(req.Principal, "", commitKey(req))) {
			return
		}
		if wait > 0 {
			req.Wait = wait
			ans, err = svc.CommitSession(r.Context(), req)
		}
	}
	if err != nil {
		txnID := receipt.Bind(req.Principal, "", commitKey(req))
		w.Header().Set(headerTxnID, txnID)
		writeTxnProblem(w, s.failures.classify(r, err), txnID)
		return
	}
	if asked {
		w.Header().Set("Preference-Applied", "wait="+strconv.Itoa(int(wait/time.Second)))
	}
	if ans.TxnID != "" {
		s.metrics.keyed(ans)
	}
	writeAnswer(w, ans)
}

// commitKey is the key a commit binds: its Idempotency-Key, or the
// session ID.
func commitKey(req receipt.CommitRequest) string {
	if req.Key == "" {
		return req.Session
	}
	return req.Key
}

// writeSessionError answers a failed session step on svc, the session's
// shard: one held by another live node is forwarded there when this server
// forwards (body is the request's), else answered 503 naming the node.
func (s *sessionRoutes) writeSessionError(w http.ResponseWriter, r *http.Request, svc *receipt.Service, body []byte, err error) {
	var elsewhere *receipt.HeldElsewhereError
	if errors.As(err, &elsewhere) {
		if s.peers.mayForward(r) && s.peers.forward(w, r, svc, body, elsewhere.Holder, 0, "") {
			return
		}
		writeProblem(w, code.Unavailable, fmt.Sprintf("session %s is held by node %s, which did not answer here; retry", elsewhere.Session, elsewhere.Holder.Node))
		return
	}
	s.failures.writeError(w, r, err)
}

// strictJSON decodes body into v, refusing unknown members and trailing
// data.
func strictJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the object")
	}
	return nil
}
