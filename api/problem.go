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
	Type          string `json:"type"`
	Title         string `json:"title"`
	Status        int    `json:"status"`
	Detail        string `json:"detail,omitempty"`
	Code          string `json:"code"`
	Retryable     bool   `json:"retryable"`
	RetryWith     string `json:"retry_with"`
	Outcome       string `json:"outcome,omitempty"`
	TransactionID string `json:"transaction_id,omitempty"`
}

const problemContentType = "application/problem+json"

// problemTypeBase prefixes each code to form the problem's type URI.
const problemTypeBase = "urn:idem:problem:"

var titles = map[code.Code]string{
	code.InvalidRequest:      "Invalid request",
	code.InvalidKey:          "Invalid Idempotency-Key",
	code.Unauthenticated:     "Unauthenticated",
	code.TableNotFound:       "Table not found",
	code.DocumentNotFound:    "Document not found",
	code.TransactionConflict: "Transaction conflict",
	code.TransactionAborted:  "Transaction aborted",
	code.RequestInProgress:   "Request in progress",
	code.KeyMismatch:         "Idempotency-Key reused with a different request",
	code.Overloaded:          "Overloaded",
	code.ReceiptPending:      "Outcome pending",
	code.PayloadTooLarge:     "Payload too large",
	code.UnsupportedMedia:    "Unsupported media type",
	code.ReceiptNotFound:     "Receipt not found",
	code.NotFound:            "Not found",
	code.MethodNotAllowed:    "Method not allowed",
	code.Internal:            "Internal error",
	code.Unavailable:         "Service unavailable",
}

func title(c code.Code) string {
	if t, ok := titles[c]; ok {
		return t
	}
	return string(c)
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
func writeProblem(w http.ResponseWriter, c code.Code, detail string) {
	info := code.Lookup(c)
	writeBody(w, info.Status, problemContentType, renderJSON(problem{
		Type: problemTypeBase + string(c), Title: title(c), Status: info.Status, Detail: detail,
		Code: string(c), Retryable: info.Retryable, RetryWith: string(info.RetryWith),
	}))
}

// writeCodeError answers with a *code.Error.
func writeCodeError(w http.ResponseWriter, e *code.Error) { writeProblem(w, e.Code, e.Message) }

// envelopeBody renders a keyed answer: the result for a commit, a problem
// otherwise. It depends on the envelope alone.
func envelopeBody(e receipt.Envelope) (status int, contentType string, body []byte) {
	if e.Outcome == receipt.OutcomeCommitted {
		return e.Status, "application/json", e.Result
	}
	return e.Status, problemContentType, renderJSON(problem{
		Type: problemTypeBase + string(e.Code), Title: title(e.Code), Status: e.Status, Detail: e.Message,
		Code: string(e.Code), Retryable: e.Retryable, RetryWith: string(e.RetryWith),
		Outcome: e.Outcome, TransactionID: e.TxnID,
	})
}

// Response headers of the keyed route.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
	headerTxnID          = "Idem-Transaction-Id"
	headerRetryAfter     = "Retry-After"
)

func writeAnswer(w http.ResponseWriter, key string, a receipt.Answer) {
	h := w.Header()
	h.Set(headerIdempotencyKey, key)
	if a.TxnID != "" {
		h.Set(headerTxnID, a.TxnID)
	}
	if a.Replayed {
		h.Set(headerReplayed, "true")
	}
	setRetryAfter(w, a.Status, a.RetryAfter)
	status, ct, body := envelopeBody(a.Envelope)
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
