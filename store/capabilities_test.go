package store

import (
	"context"
	"testing"
)

// mapStore is the least Store GetAll needs: Gets from a map, counted.
type mapStore struct {
	Store
	items map[string]Item
	gets  int
	multi MultiGetter
}

func (m *mapStore) Get(_ context.Context, key []byte) (Item, error) {
	m.gets++
	if it, ok := m.items[string(key)]; ok {
		return it, nil
	}
	return Item{}, ErrNotFound
}

func (m *mapStore) Capabilities() Capabilities { return Capabilities{MultiGet: m.multi} }

type oneCall struct {
	calls int
	keys  int
}

func (o *oneCall) GetMany(_ context.Context, keys ...[]byte) ([]Item, error) {
	o.calls++
	o.keys += len(keys)
	out := make([]Item, len(keys))
	for i, k := range keys {
		out[i] = Item{Key: k}
	}
	return out, nil
}

// TestGetAll_UsesTheDeclaredMultiGetElseOneGetPerKey: a store that declares
// MultiGet is read in one call; one that does not, with a Get per key,
// a missing key answered as an Item at Version 0.
func TestGetAll_UsesTheDeclaredMultiGetElseOneGetPerKey(t *testing.T) {
	ctx := context.Background()
	plain := &mapStore{items: map[string]Item{"a": {Key: []byte("a"), Version: 3}}}
	items, err := GetAll(ctx, plain, []byte("a"), []byte("b"))
	if err != nil || plain.gets != 2 || items[0].Version != 3 || items[1].Version != 0 || string(items[1].Key) != "b" {
		t.Fatalf("plain: %v, %d gets, %+v", err, plain.gets, items)
	}
	multi := &oneCall{}
	withMulti := &mapStore{multi: multi}
	if _, err := GetAll(ctx, withMulti, []byte("a"), []byte("b"), []byte("c")); err != nil || multi.calls != 1 || multi.keys != 3 || withMulti.gets != 0 {
		t.Fatalf("multi: %v, %d calls of %d keys, %d gets", err, multi.calls, multi.keys, withMulti.gets)
	}
	if _, err := GetAll(ctx, plain, make([][]byte, GetManyMax+1)...); err == nil {
		t.Fatal("GetAll of more than GetManyMax keys accepted")
	}
}

// TestOnSequenced_RunsTheCallersFunctionOnceSequenced: Sequenced calls
// what OnSequenced put in the context, and nothing without it.
func TestOnSequenced_RunsTheCallersFunctionOnceSequenced(t *testing.T) {
	n := 0
	Sequenced(context.Background())
	Sequenced(OnSequenced(context.Background(), func() { n++ }))
	if n != 1 {
		t.Fatalf("called %d times, want 1", n)
	}
}
