package api

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// Operators see and unstick receipts through two routes (docs/receipts.md,
// "Operators"):
//
//	GET  /v1/receipts?state=…&older_than=…&limit=…&cursor=…[&principal=…]
//	POST /v1/admin/receipts/{txn_id}/resolve
//
// The listing is every caller's, of its own receipts; an operator
// (Options.Admins) may list another principal's, or everyone's. Only an
// operator may resolve, and what it may do is what recovery may: a
// presumed abort through the decision's create-if-absent
// (receipt.Service.Resolve).

// adminRoutes serve the operators' routes: the receipt listing, resolve
// and backup (backup.go).
type adminRoutes struct {
	opts     *Options
	auth     *authenticator
	shardMap *shardMap
	bodies   *bodies
	failures *failures
	metrics  *metrics
}

// isAdmin says whether the request's principal is an operator: one of
// Options.Admins or, on a server without tokens, the single principal.
func (s *authenticator) isAdmin(r *http.Request) bool {
	p := principalOf(r.Context())
	if s.anonymous() {
		return true
	}
	for _, a := range s.opts.Admins {
		if a == p {
			return true
		}
	}
	return false
}

// ListedReceipt is one receipt of a listing, as GET /v1/receipts answers
// it (idemctl decodes it).
type ListedReceipt struct {
	TransactionID string     `json:"transaction_id"`
	Principal     string     `json:"principal"`
	Table         string     `json:"table"`
	Key           string     `json:"key"`
	State         string     `json:"state"`
	Created       time.Time  `json:"created"`
	Started       *time.Time `json:"started,omitempty"`
	Completed     *time.Time `json:"completed,omitempty"`
	Owner         string     `json:"owner,omitempty"`
	Debt          bool       `json:"debt"`
	Outcome       string     `json:"outcome,omitempty"`
	ResolvedBy    string     `json:"resolved_by,omitempty"`
}

// listFilter reads the listing's query; a bad parameter is its problem.
func (s *adminRoutes) listFilter(r *http.Request) (receipt.ListFilter, *code.Error) {
	q := r.URL.Query()
	f := receipt.ListFilter{Principal: principalOf(r.Context())}
	switch st := q.Get("state"); st {
	case "", "mutable":
	case "pending":
		f.State = receipt.Pending
	case "started":
		f.State = receipt.Started
	case "terminal":
		f.Terminal = true
	default:
		return f, code.Errorf(code.InvalidRequest, "state %q: must be pending, started, mutable (both, and terminal receipts owing visibility) or terminal", st)
	}
	if v := q.Get("older_than"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return f, code.Errorf(code.InvalidRequest, "older_than %q: must be a non-negative duration such as 90s or 2h", v)
		}
		f.OlderThan = d
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > receipt.ListLimitMax {
			return f, code.Errorf(code.InvalidRequest, "limit must be an integer in 1..%d", receipt.ListLimitMax)
		}
		f.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		c, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil {
			return f, code.Errorf(code.InvalidRequest, "cursor: not one this listing gave")
		}
		f.After = c
	}
	if p, ok := q["principal"]; ok {
		if !s.auth.isAdmin(r) {
			return f, code.Errorf(code.Forbidden, "only an operator may list another principal's receipts")
		}
		f.Principal = p[0] // "" lists every principal's
	}
	return f, nil
}

// listReceipts serves GET /v1/receipts.
func (s *adminRoutes) listReceipts(w http.ResponseWriter, r *http.Request) {
	f, cerr := s.listFilter(r)
	if cerr != nil {
		writeCodeError(w, cerr)
		return
	}
	page, err := s.shardMap.listAllReceipts(r.Context(), f)
	if errors.Is(err, receipt.ErrBadCursor) {
		writeProblem(w, code.InvalidRequest, "cursor: not one this listing gave")
		return
	}
	if err != nil {
		s.failures.writeError(w, r, err)
		return
	}
	out := ReceiptList{Receipts: make([]ListedReceipt, 0, len(page.Receipts))}
	for _, l := range page.Receipts {
		j := ListedReceipt{TransactionID: l.TxnID, Principal: l.Principal, Table: l.Table, Key: l.Key, State: l.State.String(),
			Created: l.Created.UTC(), Started: utcOrNil(l.Started), Completed: utcOrNil(l.Completed), Debt: l.Debt != 0,
			Outcome: l.Outcome, ResolvedBy: l.ResolvedBy}
		if l.Owner != nil && l.State != receipt.Terminal {
			j.Owner = l.Owner.Node
		}
		out.Receipts = append(out.Receipts, j)
	}
	if page.Next != nil {
		out.Next = base64.RawURLEncoding.EncodeToString(page.Next)
	}
	writeJSON(w, http.StatusOK, out)
}

// ReceiptList is one page of GET /v1/receipts.
type ReceiptList struct {
	Receipts []ListedReceipt `json:"receipts"`
	Next     string          `json:"next,omitempty"` // the cursor of the next page
}

// resolutionJSON is what a resolution did.
type resolutionJSON struct {
	TransactionID string       `json:"transaction_id"`
	Outcome       string       `json:"outcome"`
	Decided       bool         `json:"decided_by_operator"`
	WasTerminal   bool         `json:"was_terminal"`
	Envelope      envelopeJSON `json:"envelope"`
}

// resolveReceipt serves POST /v1/admin/receipts/{txn_id}/resolve.
func (s *adminRoutes) resolveReceipt(w http.ResponseWriter, r *http.Request) {
	if !s.auth.isAdmin(r) {
		writeProblem(w, code.Forbidden, "only an operator may resolve a receipt")
		return
	}
	id := r.PathValue("txn_id")
	res, err := s.shardMap.resolveAny(r.Context(), id, principalOf(r.Context()))
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(w, code.ReceiptNotFound, fmt.Sprintf("no receipt %q", id))
		return
	}
	if err != nil {
		s.failures.writeError(w, r, err)
		return
	}
	s.metrics.resolution(res)
	e := res.Envelope
	writeJSON(w, http.StatusOK, resolutionJSON{TransactionID: res.TxnID, Outcome: res.Outcome, Decided: res.Decided,
		WasTerminal: res.WasTerminal, Envelope: envelopeJSON{Status: e.Status, Outcome: e.Outcome, Code: string(e.Code),
			Message: e.Message, Retryable: e.Retryable, RetryWith: string(e.RetryWith), Result: e.Result}})
}
