package api_test

import (
	"fmt"
	"testing"
)

// TestBatch_RecycledBodiesDoNotBleed: the batch route reuses its bodies'
// buffers (bodypool.go). Keyed and key-less batches of other sizes, one
// after the other, each store their own documents, and each key replays
// its own answer to its own bytes: nothing a request kept points into a
// buffer the next request overwrote.
func TestBatch_RecycledBodiesDoNotBleed(t *testing.T) {
	n := newNode(t, config{})
	n.createTable("t")
	pad := func(i int) string {
		p := make([]byte, 40*(i%7))
		for j := range p {
			p[j] = byte('a' + (i+j)%26)
		}
		return string(p)
	}
	body := func(i int) string {
		return fmt.Sprintf(`{"inserts":[{"id":"d%d","doc":{"i":%d,"pad":%q}}]}`, i, i, pad(i))
	}
	answers := map[int]string{}
	for i := range 30 {
		key := ""
		if i%3 != 0 {
			key = fmt.Sprintf("k%d", i)
		}
		res := n.batch("t", key, body(i))
		if res.Status != 201 {
			t.Fatalf("batch %d: %d %s", i, res.Status, res.Body)
		}
		answers[i] = string(res.Body)
	}
	for i := range 30 {
		if d := n.doc("t", fmt.Sprintf("d%d", i)); d["i"] != float64(i) || d["pad"] != pad(i) {
			t.Fatalf("doc d%d: %v", i, d)
		}
		if i%3 == 0 {
			continue
		}
		again := n.batch("t", fmt.Sprintf("k%d", i), body(i))
		if again.Status != 201 || string(again.Body) != answers[i] || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay of k%d: %d %s, want %s", i, again.Status, again.Body, answers[i])
		}
	}
}
