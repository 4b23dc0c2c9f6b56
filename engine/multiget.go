package engine

import (
	"context"
	"errors"
)

// MultiGetter is implemented by stores that read several keys in one
// round trip and one point-in-time view (etcd: one read-only Txn). It is
// an optimisation, like Chainer: GetAll works on every store.
type MultiGetter interface {
	// GetMany returns one Item per key, in order; a missing key's Item has
	// its Key and Version 0. Errors are Get's.
	GetMany(ctx context.Context, keys ...[]byte) ([]Item, error)
}

// GetManyMax bounds the keys of one GetMany: a handful, read together on
// the hot path, never a scan.
const GetManyMax = 16

// GetAll reads keys through s's GetMany if it has one, else one Get each
// (then not one view: fine for keys that are read together only to save
// round trips). A missing key's Item has its Key and Version 0.
func GetAll(ctx context.Context, s Store, keys ...[]byte) ([]Item, error) {
	if len(keys) > GetManyMax {
		return nil, errors.New("engine: GetAll of more than GetManyMax keys")
	}
	if m, ok := s.(MultiGetter); ok {
		return m.GetMany(ctx, keys...)
	}
	out := make([]Item, len(keys))
	for i, k := range keys {
		it, err := s.Get(ctx, k)
		switch {
		case errors.Is(err, ErrNotFound):
			out[i] = Item{Key: k}
		case err != nil:
			return nil, err
		default:
			out[i] = it
		}
	}
	return out, nil
}
