package api

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
)

// problem is an RFC 9457 problem details body with Idem's extension
// members. Its field order is fixed, so the same envelope always renders to
// the same bytes — which is what makes a replay byte-for-byte.
type problem struct {
	Type          string        `json:"type"`
	Title         string        `json:"title"`
	Status        int           `json:"status"`
	Detail        string        `json:"detail,omitempty"`
	Code          string        `json:"code"`
	Retryable     bool          `json:"retryable"`
	RetryWith     string        `json:"retry_with,omitempty"` // keyed answers only
	Retry         string        `json:"retry,omitempty"`      // new_session: a session commit that did not commit
	Outcome       string        `json:"outcome,omitempty"`
	TransactionID string        `json:"transaction_id,omitempty"`
	Original      *originalJSON `json:"original_receipt,omitempty"` // a 422 key mismatch, a 409 expired key
	Differences   *diffJSON     `json:"differences,omitempty"`      // a 422 key mismatch whose receipt kept digests
}

// diffJSON is the differences member of a 422 key mismatch: which entries
// of this request differ from the original's (receipt.Diff).
type diffJSON struct {
	Complete bool            `json:"complete"`
	Entries  []diffEntryJSON `json:"entries"`
}

type diffEntryJSON struct {
	Change string `json:"change"`
	List   string `json:"list"`
	Index  int    `json:"index"`
	ID     string `json:"id,omitempty"`
}

func diffOf(o *receipt.Original) *diffJSON {
	if o == nil || o.Diff == nil {
		return nil
	}
	d := &diffJSON{Complete: o.Diff.Complete, Entries: make([]diffEntryJSON, len(o.Diff.Entries))}
	for i, e := range o.Diff.Entries {
		d.Entries[i] = diffEntryJSON{Change: e.Change, List: e.List, Index: e.Index, ID: e.ID}
	}
	return d
}

const problemContentType = "application/problem+json"

// problemTypeBase prefixes each code to form the problem's type URI.
const problemTypeBase = "urn:idem:problem:"

// title is the problem title of code c, from the code registry (code.Info);
// an unregistered code (none is stored) is its own title.
func title(c code.Code) string {
	if !code.Known(c) {
		return string(c)
	}
	return code.Lookup(c).Title
}

// renderJSON encodes v without HTML escaping and without a trailing newline.
func renderJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// writeProblem answers with a problem for code c (no receipt involved).
// An answer is keyed when it echoes an Idempotency-Key; only a keyed
// answer says how to retry with respect to the key (retry_with), since the
// choice means nothing without one. Unkeyed answers say retryable alone.
func writeProblem(w http.ResponseWriter, c code.Code, detail string) {
	writeProblemAfter(w, c, detail, 0)
}

// writeProblemAfter is writeProblem with a Retry-After of after (0: the
// status's default).
func writeProblemAfter(w http.ResponseWriter, c code.Code, detail string, after time.Duration) {
	keyed := w.Header().Get(headerIdempotencyKey) != ""
	status := code.Lookup(c).Status
	setRetryAfter(w, status, after)
	writeBody(w, status, problemContentType, problemBody(c, detail, keyed))
}

// problemBody renders the problem of code c.
func problemBody(c code.Code, detail string, keyed bool) []byte {
	info := code.Lookup(c)
	p := problem{
		Type: problemTypeBase + string(c), Title: title(c), Status: info.Status, Detail: detail,
		Code: string(c), Retryable: info.Retryable,
	}
	if keyed {
		p.RetryWith = string(info.RetryWith)
	}
	return renderJSON(p)
}

// writeTxnProblem answers a keyed request whose transaction is known but
// whose outcome is not.
func writeTxnProblem(w http.ResponseWriter, e *code.Error, txnID string) {
	info := code.Lookup(e.Code)
	setRetryAfter(w, info.Status, e.RetryAfter)
	writeBody(w, info.Status, problemContentType, renderJSON(problem{
		Type: problemTypeBase + string(e.Code), Title: title(e.Code), Status: info.Status, Detail: e.Message,
		Code: string(e.Code), Retryable: info.Retryable, RetryWith: string(info.RetryWith), TransactionID: txnID,
	}))
}

// writeCodeError answers with a *code.Error.
func writeCodeError(w http.ResponseWriter, e *code.Error) {
	writeProblemAfter(w, e.Code, e.Message, e.RetryAfter)
}

// originalJSON is the original_receipt member of a 422 key mismatch: the
// receipt the key is bound to, reported apart from this request's own
// outcome (not_applied).
type originalJSON struct {
	TransactionID string `json:"transaction_id"`
	State         string `json:"state"`
	Outcome       string `json:"outcome,omitempty"`
	// Of an expired key (state "expired") only.
	Completed      *time.Time `json:"completed,omitempty"`
	ProtectedUntil *time.Time `json:"protected_until,omitempty"`
	SameRequest    *bool      `json:"same_request,omitempty"`
}

// envelopeBody renders a keyed answer: the result for a commit, a problem
// otherwise. It depends on the envelope (and, for a mismatch, the original
// receipt's state) alone.
func envelopeBody(e receipt.Envelope, orig *receipt.Original) (status int, contentType string, body []byte) {
	if e.Outcome == receipt.OutcomeCommitted {
		return e.Status, "application/json", e.Result
	}
	return e.Status, problemContentType, renderJSON(problem{
		Type: problemTypeBase + string(e.Code), Title: title(e.Code), Status: e.Status, Detail: e.Message,
		Code: string(e.Code), Retryable: e.Retryable, RetryWith: string(e.RetryWith), Retry: e.Retry,
		Outcome: e.Outcome, TransactionID: e.TxnID, Original: originalOf(orig), Differences: diffOf(orig),
	})
}

func originalOf(o *receipt.Original) *originalJSON {
	if o == nil {
		return nil
	}
	out := &originalJSON{TransactionID: o.TxnID, State: o.State.String(), Outcome: o.Outcome}
	if o.State == receipt.Expired {
		done, until, same := o.Completed.UTC(), o.ProtectUntil.UTC(), o.SameRequest
		out.Completed, out.ProtectedUntil, out.SameRequest = &done, &until, &same
	}
	return out
}

// Response headers of the keyed route.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
	headerTxnID          = "Idem-Transaction-Id"
	headerRetryAfter     = "Retry-After"
	headerKeyExpiry      = "Idem-Key-Expiry" // expiry.go
)

// writeAnswer renders a keyed answer; the caller has set the
// Idempotency-Key echo.
func writeAnswer(w http.ResponseWriter, a receipt.Answer) { writeAnswerWith(w, new(headerSlots), a) }

// writeAnswerWith is writeAnswer setting its fields through hs, which the
// handler may have begun to fill.
func writeAnswerWith(w http.ResponseWriter, hs *headerSlots, a receipt.Answer) {
	h := w.Header()
	if a.TxnID != "" {
		hs.set(h, headerTxnID, a.TxnID)
	}
	if a.Replayed {
		hs.set(h, headerReplayed, "true")
	}
	if v := keyExpiry(a.Expiry); v != "" {
		hs.set(h, headerKeyExpiry, v)
	}
	if v := retryAfter(a.Status, a.RetryAfter); v != "" {
		hs.set(h, headerRetryAfter, v)
	}
	status, ct, body := envelopeBody(a.Envelope, a.Original)
	writeBodyWith(w, hs, status, ct, body)
}

// setRetryAfter sets Retry-After (whole seconds) on 409-in-progress, 429
// and 503 answers.
func setRetryAfter(w http.ResponseWriter, status int, d time.Duration) {
	if v := retryAfter(status, d); v != "" {
		w.Header().Set(headerRetryAfter, v)
	}
}

// retryAfter is the Retry-After value of an answer, "" for none.
func retryAfter(status int, d time.Duration) string {
	if status != 409 && status != 429 && status != 503 {
		return ""
	}
	if d <= 0 {
		if status == 409 {
			return "" // a conflict, not an in-progress answer
		}
		d = time.Second
	}
	return strconv.Itoa(int(math.Ceil(d.Seconds())))
}

func writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	writeBodyWith(w, new(headerSlots), status, contentType, body)
}

// writeBodyWith is writeBody setting its fields through hs.
func writeBodyWith(w http.ResponseWriter, hs *headerSlots, status int, contentType string, body []byte) {
	h := w.Header()
	hs.set(h, "Content-Type", contentType)
	hs.set(h, "Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	writeBody(w, status, "application/json", renderJSON(v))
}
