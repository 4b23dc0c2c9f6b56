package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemdb/idem/store"
)

func TestEnvelope_RoundTripsAndRefusesForeignValues(t *testing.T) {
	for _, v := range [][]byte{nil, {}, []byte("x"), bytes.Repeat([]byte{0xff}, 1000)} {
		got, nonce, err := unseal([]byte("k"), seal(v, 0xdeadbeef01))
		if err != nil || !bytes.Equal(got, v) || nonce != 0xdeadbeef01 {
			t.Fatalf("%q: %q %x %v", v, got, nonce, err)
		}
	}
	for _, stored := range [][]byte{nil, {1, 2, 3}, append([]byte{2}, make([]byte, 20)...), []byte("plain text someone else wrote")} {
		if _, _, err := unseal([]byte("k"), stored); !errors.Is(err, store.ErrCorruption) {
			t.Fatalf("%q: %v, want ErrCorruption", stored, err)
		}
	}
}

func TestLastOpPerKey_KeepsTheLastOpOfEachKeyInBatchOrder(t *testing.T) {
	b := new(store.Batch).Put([]byte("a"), []byte("1")).Put([]byte("b"), nil).Delete([]byte("a")).
		Put([]byte("c"), nil).Put([]byte("b"), []byte("2"))
	got := lastOpPerKey(b.Ops)
	want := []store.Op{{Key: []byte("a"), Delete: true}, {Key: []byte("c")}, {Key: []byte("b"), Value: []byte("2")}}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) || got[i].Delete != want[i].Delete {
			t.Fatalf("op %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// Only what etcd refuses before proposing is "not applied"; everything
// else — the errors a stopped leader or a deadline produce among them —
// must reach the layers above as ErrAmbiguous.
func TestApplyError_OnlyExplicitRejectionsAreNotApplied(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"too many ops", rpctypes.ErrGRPCTooManyOps, store.ErrInvalidBatch},
		{"request too large", rpctypes.ErrGRPCRequestTooLarge, store.ErrInvalidBatch},
		{"duplicate key", rpctypes.ErrGRPCDuplicateKey, store.ErrInvalidBatch},
		{"client send limit", status.Error(codes.ResourceExhausted, "trying to send message larger than max (3000000 vs. 2097152)"), store.ErrInvalidBatch},
		{"no space", rpctypes.ErrGRPCNoSpace, store.ErrFailStopped},
		{"permission denied", rpctypes.ErrGRPCPermissionDenied, store.ErrFailStopped},
		{"invalid token", rpctypes.ErrGRPCInvalidAuthToken, store.ErrFailStopped},
		{"deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), store.ErrAmbiguous},
		{"context", context.DeadlineExceeded, store.ErrAmbiguous},
		{"server stopped", rpctypes.ErrGRPCStopped, store.ErrAmbiguous},
		{"leader changed", rpctypes.ErrGRPCLeaderChanged, store.ErrAmbiguous},
		{"timeout", rpctypes.ErrGRPCTimeout, store.ErrAmbiguous},
		{"no leader", rpctypes.ErrGRPCNoLeader, store.ErrAmbiguous},
		{"too many requests", rpctypes.ErrGRPCRequestTooManyRequests, store.ErrAmbiguous},
		{"unavailable", status.Error(codes.Unavailable, "connection reset"), store.ErrAmbiguous},
		{"unknown", errors.New("something else"), store.ErrAmbiguous},
	} {
		got := applyError(c.err)
		if !errors.Is(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		for _, other := range []error{store.ErrInvalidBatch, store.ErrFailStopped, store.ErrAmbiguous} {
			if other != c.want && errors.Is(got, other) {
				t.Errorf("%s: %v is also %v", c.name, got, other)
			}
		}
	}
}

func TestRangeEnd_BoundsExactlyThePrefix(t *testing.T) {
	for _, c := range []struct{ prefix, want string }{
		{"/idem/", "/idem0"}, {"a\xff", "b"}, {"\xff\xff", "\x00"}, {"", "\x00"},
	} {
		if got := string(rangeEnd([]byte(c.prefix))); got != c.want {
			t.Errorf("rangeEnd(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
}

// TestReadError_TheCallersContextOrUnavailable: a failed read is the
// caller's own context error when that ended, and ErrUnavailable for
// anything else (the store's own bound, no leader, a lost connection).
func TestReadError_TheCallersContextOrUnavailable(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := readError(ended, status.Error(codes.Canceled, "context canceled")); !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("caller's context ended: %v", err)
	}
	for _, cause := range []error{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), rpctypes.ErrGRPCNoLeader, status.Error(codes.Unavailable, "connection refused")} {
		if err := readError(context.Background(), cause); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("%v: %v, want ErrUnavailable", cause, err)
		}
	}
}
