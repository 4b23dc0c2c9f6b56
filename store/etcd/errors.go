package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemdb/idem/store"
)

// ErrRejected marks a write etcd refused before proposing it to Raft, for
// a reason that outlives the call — its space quota is exhausted (the
// NOSPACE alarm), or the client may not write. Nothing was written. It
// comes wrapped in store.ErrFailStopped: the store refuses writes until
// an operator clears the cause, and the layers above answer as they do
// for a local store that fail-stopped — except that NOSPACE is marked
// store.ErrNoSpace too: answered store_full, and no restart is needed
// once space is freed.
var ErrRejected = errors.New("etcdstore: etcd rejected the write")

// applyError is what a failed Txn call means under the engine contract.
// Only the rejections etcd makes before it proposes the request to Raft
// say "not applied"; every other error — a timeout, a stopped leader, a
// lost connection — may come after the entry reached a quorum, so it is
// ambiguous.
func applyError(err error) error {
	switch rpctypes.Error(err) {
	case rpctypes.ErrTooManyOps, rpctypes.ErrRequestTooLarge, rpctypes.ErrDuplicateKey:
		return fmt.Errorf("%w: %w", store.ErrInvalidBatch, err)
	case rpctypes.ErrNoSpace:
		return fmt.Errorf("%w: %w: %w: %w", store.ErrFailStopped, store.ErrNoSpace, ErrRejected, err)
	case rpctypes.ErrPermissionDenied, rpctypes.ErrAuthFailed,
		rpctypes.ErrInvalidAuthToken, rpctypes.ErrAuthOldRevision, rpctypes.ErrUserEmpty:
		return fmt.Errorf("%w: %w: %w", store.ErrFailStopped, ErrRejected, err)
	}
	if tooLargeToSend(err) {
		return fmt.Errorf("%w: %w", store.ErrInvalidBatch, err)
	}
	return fmt.Errorf("%w: %w", store.ErrAmbiguous, err)
}

// tooLargeToSend reports gRPC's refusal of a message beyond its size
// limit, by the client before sending or by the server before reading:
// either way no handler saw the request.
func tooLargeToSend(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max")
}

// readError is what a failed Range means: nothing was changed, and nothing
// is known. The caller's own context ending is reported as such; any
// other failure — the call's own bound, a lost connection, no leader — is
// store.ErrUnavailable.
func readError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("etcdstore: read: %w (%v)", ctxErr, err)
	}
	return fmt.Errorf("etcdstore: read: %w: %w", store.ErrUnavailable, rpctypes.Error(err))
}
