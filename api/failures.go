package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
)

// failures turns what the service layer failed with into the problem a
// client gets (classify), and counts and logs the refusals a store that
// accepts no writes causes, without flooding the log (unavailable.go).
type failures struct {
	opts *Options
	// unavailable counts writes refused by a store that accepts none.
	unavailable unavailableLog
	// unhealthyLogged gates the log of /healthz's 503s.
	unhealthyLogged logGate
}

// writeError answers an error from the service layer: typed codes keep
// their status; anything else is internal (and logged).
func (s *failures) writeError(w http.ResponseWriter, r *http.Request, err error) {
	writeCodeError(w, s.classify(r, err))
}

// classify turns a failure of the service layer into its problem: typed
// codes keep theirs; a store that fail-stopped (or is closing) is
// unavailable, counted and logged once; anything else is internal and
// logged.
func (s *failures) classify(r *http.Request, err error) *code.Error {
	var ce *code.Error
	switch {
	case errors.As(err, &ce):
		s.noteRefusal(ce.Code)
		return ce
	case errors.Is(err, store.ErrNoSpace):
		s.noteUnavailable(err)
		return &code.Error{Code: code.StoreFull, RetryAfter: noSpaceRetryAfter,
			Message: "the store is out of space (etcd's NOSPACE alarm): nothing was written; writes resume once space is freed, with no restart; retry later with the same key"}
	case errors.Is(err, store.ErrFailStopped), errors.Is(err, store.ErrClosed):
		s.noteUnavailable(err)
		return code.Errorf(code.Unavailable, "the store refuses writes (it fail-stopped after an I/O error, or is shutting down) until idemd restarts")
	case errors.Is(err, store.ErrUnavailable):
		s.noteUnavailable(err)
		return code.Errorf(code.Unavailable, "the store cannot be reached (this node is cut off from it); retry, through another node if you can")
	}
	msg := "internal error"
	switch {
	case errors.Is(err, store.ErrAmbiguous):
		msg = "the write's outcome is unknown"
	case errors.Is(err, context.DeadlineExceeded):
		msg = "the request timed out"
	case errors.Is(err, store.ErrCorruption):
		// Never an envelope, never a new execution: the operator's
		// idemctl check names the damaged file.
		msg = "stored data this request needs is damaged (idemctl check names it)"
	}
	s.opts.Logger.Error("api: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	return code.Errorf(code.Internal, "%s", msg)
}

func (s *failures) health() error {
	if s.opts.Health == nil {
		return nil
	}
	return s.opts.Health()
}
