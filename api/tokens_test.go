package api_test

import (
	"strings"
	"testing"

	"github.com/idemdb/idem/api"
)

// TestParseTokens_RefusesShortTokens: a token shorter than
// api.TokenBytesMin is refused, the error naming its line and principal
// but never the token (it goes to logs); one of exactly the minimum is
// accepted.
func TestParseTokens_RefusesShortTokens(t *testing.T) {
	long := strings.Repeat("x", api.TokenBytesMin)
	got, err := api.ParseTokens(strings.NewReader("# ops\nops:" + long + "\n"))
	if err != nil || got[long] != "ops" {
		t.Fatalf("a %d-byte token: %v %v", api.TokenBytesMin, got, err)
	}
	short := "s3cret-" + strings.Repeat("y", api.TokenBytesMin-8) // one byte short
	_, err = api.ParseTokens(strings.NewReader("ops:" + long + "\n\nbob:" + short + "\n"))
	if err == nil || !strings.Contains(err.Error(), `line 3: principal "bob": token shorter than 16 bytes`) {
		t.Fatalf("a %d-byte token: %v", len(short), err)
	}
	if strings.Contains(err.Error(), short) || strings.Contains(err.Error(), long) {
		t.Fatalf("the error prints a token: %v", err)
	}
}

// TestAuth_SetTokensSwapsWhole: SetTokens puts a new set in force at once
// (a removed token is 401 from then on, an added one authenticates), and
// refuses, keeping the set in force, an empty set, a short token, or any
// set on a server that was built without tokens.
func TestAuth_SetTokensSwapsWhole(t *testing.T) {
	t.Parallel()
	oldTok, newTok := "old-token-0123456789", "new-token-0123456789"
	n := newNode(t, config{tokens: map[string]string{oldTok: "alice"}})
	n.c.WithToken(oldTok).Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	if err := n.srv.SetTokens(map[string]string{newTok: "alice"}); err != nil {
		t.Fatal(err)
	}
	checkProblem(t, n.c.WithToken(oldTok).Do("GET", "/v1/tables", nil).Problem(t, 401), "unauthenticated", 401, false, "none")
	n.c.WithToken(newTok).Do("PUT", "/v1/tables/t", nil).JSON(t, 200, nil) // the same principal's table

	for _, c := range []struct {
		name string
		set  map[string]string
		want string
	}{
		{"empty", map[string]string{}, "no token"},
		{"short", map[string]string{newTok: "alice", "tiny-tok": "bob"}, `principal "bob": token shorter than 16 bytes`},
	} {
		err := n.srv.SetTokens(c.set)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "tiny-tok") {
			t.Fatalf("%s set: %v, want %q (and no token)", c.name, err, c.want)
		}
		n.c.WithToken(newTok).Do("GET", "/v1/tables", nil).JSON(t, 200, nil)
	}
	n.c.WithToken("tiny-tok").Do("GET", "/v1/tables", nil).Problem(t, 401)

	anon := newNode(t, config{})
	if err := anon.srv.SetTokens(map[string]string{newTok: "alice"}); err == nil {
		t.Fatal("a server without tokens took a set")
	}
	anon.c.Do("GET", "/v1/tables", nil).JSON(t, 200, nil)
}
