package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

// tableRoutes serve the routes of tables, documents and receipts.
type tableRoutes struct {
	shardMap *shardMap
	bodies   *bodies
	failures *failures
}

type tableJSON struct {
	Name   string `json:"name"`
	Shards int    `json:"shards"`
}

// createTableJSON is the optional body of PUT /v1/tables/{table}.
// Shards 0 (or absent) asks for the default when the table is created and
// for nothing when it exists.
type createTableJSON struct {
	Shards int `json:"shards"`
}

// putTable serves PUT /v1/tables/{table}: 201 when created, 200 when it
// already existed with the settings asked for, 409 when it has others.
// The optional body is {"shards": n}; like every body, unknown members are
// refused, so that a misspelt setting is never silently ignored.
func (s *tableRoutes) putTable(w http.ResponseWriter, r *http.Request) {
	body, ok := s.bodies.readBody(w, r)
	if !ok {
		return
	}
	var req createTableJSON
	if len(body) > 0 {
		if err := strictJSON(body, &req); err != nil {
			writeProblem(w, code.InvalidRequest, `body must be {"shards": n} or empty: `+err.Error())
			return
		}
	}
	tbl := r.PathValue("table")
	m, created, err := s.shardMap.shardFor(r, tbl).Tables().Create(r.Context(), principalOf(r.Context()), tbl, req.Shards)
	if err != nil {
		s.failures.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	} else if req.Shards != 0 && req.Shards != m.Shards {
		// A 200 would say the shard count asked for is in force; it is not,
		// and cannot be made so (a table's shards are fixed at creation).
		writeProblem(w, code.TableSettingsConflict, fmt.Sprintf(
			"table %q exists with shards %d, not the shards %d asked for; a table's shard count is fixed when it is created",
			m.Name, m.Shards, req.Shards))
		return
	}
	writeJSON(w, status, tableJSON{Name: m.Name, Shards: m.Shards})
}

func (s *tableRoutes) deleteTable(w http.ResponseWriter, r *http.Request) {
	tbl := r.PathValue("table")
	if err := s.shardMap.shardFor(r, tbl).Tables().Drop(r.Context(), principalOf(r.Context()), tbl); err != nil {
		s.failures.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listTables serves GET /v1/tables?limit=N&after=NAME: a page of the
// caller's tables.
func (s *tableRoutes) listTables(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > table.TablesListMax {
			writeProblem(w, code.InvalidRequest, fmt.Sprintf("limit must be an integer in 1..%d", table.TablesListMax))
			return
		}
		limit = n
	}
	after := q.Get("after")
	if after != "" && !table.ValidTableName(after) {
		writeProblem(w, code.InvalidRequest, fmt.Sprintf("after must be a table name (1..%d of A-Z a-z 0-9 _ -)", table.TableNameBytesMax))
		return
	}
	ms, next, err := s.shardMap.listAllTables(r, after, limit)
	if err != nil {
		s.failures.writeError(w, r, err)
		return
	}
	out := struct {
		Tables []tableJSON `json:"tables"`
		Next   string      `json:"next,omitempty"`
	}{Tables: make([]tableJSON, 0, len(ms)), Next: next}
	for _, m := range ms {
		out.Tables = append(out.Tables, tableJSON{Name: m.Name, Shards: m.Shards})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *tableRoutes) getDoc(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	tbl := r.PathValue("table")
	doc, err := s.shardMap.shardFor(r, tbl).Tables().Get(r.Context(), principalOf(r.Context()), tbl, id)
	if err != nil {
		s.failures.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		ID  string          `json:"id"`
		Doc json.RawMessage `json:"doc"`
	}{id, doc})
}

type envelopeJSON struct {
	Status    int             `json:"status"`
	Outcome   string          `json:"outcome"`
	Code      string          `json:"code,omitempty"`
	Message   string          `json:"message,omitempty"`
	Retryable bool            `json:"retryable"`
	RetryWith string          `json:"retry_with,omitempty"`
	Retry     string          `json:"retry,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
}

type receiptJSON struct {
	TransactionID string        `json:"transaction_id"`
	State         string        `json:"state"`
	Created       *time.Time    `json:"created,omitempty"` // not kept by a tombstone
	Owner         string        `json:"owner,omitempty"`
	Debt          bool          `json:"debt"`
	Envelope      *envelopeJSON `json:"envelope,omitempty"`
	// Terminal and expired receipts: the outcome, when it completed, and
	// the promise of Idem-Key-Expiry (replay_until: terminal only).
	Outcome        string     `json:"outcome,omitempty"`
	Completed      *time.Time `json:"completed,omitempty"`
	ReplayUntil    *time.Time `json:"replay_until,omitempty"`
	ProtectedUntil *time.Time `json:"protected_until,omitempty"`
}

// utcOrNil is t in UTC, or nil when it is zero (omitted).
func utcOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// getReceipt serves GET /v1/receipts/{table}/{key}: the caller's own
// receipt for that key.
func (s *tableRoutes) getReceipt(w http.ResponseWriter, r *http.Request) {
	tbl := r.PathValue("table")
	v, err := s.shardMap.shardFor(r, tbl).Lookup(r.Context(), principalOf(r.Context()), tbl, r.PathValue("key"))
	s.writeReceipt(w, r, v, err)
}

// getSessionReceipt serves GET /v1/sessions/{id}/receipt: the receipt of
// the session's commit, as getReceipt shows a keyed batch's (its binding's
// table is "", which no receipts route can name).
func (s *tableRoutes) getSessionReceipt(w http.ResponseWriter, r *http.Request) {
	svc, _, ok := s.shardMap.sessionShard(w, r)
	if !ok {
		return
	}
	v, err := svc.LookupSessionCommit(r.Context(), principalOf(r.Context()), r.PathValue("id"))
	s.writeReceipt(w, r, v, err)
}

// writeReceipt answers a receipt lookup.
func (s *tableRoutes) writeReceipt(w http.ResponseWriter, r *http.Request, v receipt.View, err error) {
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(w, code.ReceiptNotFound, "no receipt for this key")
		return
	}
	if err != nil {
		s.failures.writeError(w, r, err)
		return
	}
	out := receiptJSON{TransactionID: v.TxnID, State: v.State.String(), Created: utcOrNil(v.Created), Debt: v.Debt != 0,
		Outcome: v.Outcome, Completed: utcOrNil(v.Completed),
		ReplayUntil: utcOrNil(v.Expiry.ReplayUntil), ProtectedUntil: utcOrNil(v.Expiry.ProtectUntil)}
	if v := keyExpiry(v.Expiry); v != "" {
		w.Header().Set(headerKeyExpiry, v)
	}
	if v.Owner != nil && v.State != receipt.Terminal {
		out.Owner = v.Owner.Node
	}
	if e := v.Envelope; e != nil {
		out.Envelope = &envelopeJSON{Status: e.Status, Outcome: e.Outcome, Code: string(e.Code), Message: e.Message,
			Retryable: e.Retryable, RetryWith: string(e.RetryWith), Retry: e.Retry, Result: e.Result}
	}
	writeJSON(w, http.StatusOK, out)
}
