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
	Outcome       string        `json:"outcome,omitempty"`
	TransactionID string        `json:"transaction_id,omitempty"`
	Original      *originalJSON `json:"original_receipt,omitempty"` // a 422 key mismatch only
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
	keyed := w.Header().Get(headerIdempotencyKey) != ""
	status := code.Lookup(c).Status
	setRetryAfter(w, status, 0)
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
	setRetryAfter(w, info.Status, 0)
	writeBody(w, info.Status, problemContentType, renderJSON(problem{
		Type: problemTypeBase + string(e.Code), Title: title(e.Code), Status: info.Status, Detail: e.Message,
		Code: string(e.Code), Retryable: info.Retryable, RetryWith: string(info.RetryWith), TransactionID: txnID,
	}))
}

// writeCodeError answers with a *code.Error.
func writeCodeError(w http.ResponseWriter, e *code.Error) { writeProblem(w, e.Code, e.Message) }

// originalJSON is the original_receipt member of a 422 key mismatch: the
// receipt the key is bound to, reported apart from this request's own
// outcome (not_applied).
type originalJSON struct {
	TransactionID string `json:"transaction_id"`
	State         string `json:"state"`
	Outcome       string `json:"outcome,omitempty"`
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
		Code: string(e.Code), Retryable: e.Retryable, RetryWith: string(e.RetryWith),
		Outcome: e.Outcome, TransactionID: e.TxnID, Original: originalOf(orig),
	})
}

func originalOf(o *receipt.Original) *originalJSON {
	if o == nil {
		return nil
	}
	return &originalJSON{TransactionID: o.TxnID, State: o.State.String(), Outcome: o.Outcome}
}

// Response headers of the keyed route.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
	headerTxnID          = "Idem-Transaction-Id"
	headerRetryAfter     = "Retry-After"
)

// writeAnswer renders a keyed answer; the caller has set the
// Idempotency-Key echo.
func writeAnswer(w http.ResponseWriter, a receipt.Answer) {
	h := w.Header()
	if a.TxnID != "" {
		h.Set(headerTxnID, a.TxnID)
	}
	if a.Replayed {
		h.Set(headerReplayed, "true")
	}
	setRetryAfter(w, a.Status, a.RetryAfter)
	status, ct, body := envelopeBody(a.Envelope, a.Original)
	writeBody(w, status, ct, body)
}

// setRetryAfter sets Retry-After (whole seconds) on 409-in-progress, 429
// and 503 answers.
func setRetryAfter(w http.ResponseWriter, status int, d time.Duration) {
	if status != 409 && status != 429 && status != 503 {
		return
	}
	if d <= 0 {
		if status == 409 {
			return // a conflict, not an in-progress answer
		}
		d = time.Second
	}
	w.Header().Set(headerRetryAfter, strconv.Itoa(int(math.Ceil(d.Seconds()))))
}

func writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	writeBody(w, status, "application/json", renderJSON(v))
}
