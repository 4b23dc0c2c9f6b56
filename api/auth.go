package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/idemdb/idem/code"
)

// Anonymous is the single principal when no tokens file is configured.
const Anonymous = "anonymous"

// tokensMax bounds the entries of a tokens file.
const tokensMax = 100000

// tokenBytesMin is the shortest token accepted: 16 bytes of a random
// token's alphabet cannot be guessed over the network, where a few
// characters can. It bounds tokens files and SetTokens, not Options.Tokens
// (a program's own, as tests use).
const tokenBytesMin = 16

// ParseTokens reads a tokens file: one `principal:token` per line, `#`
// comments and blank lines ignored. It returns token → principal.
func ParseTokens(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		principal, token, ok := strings.Cut(s, ":")
		principal, token = strings.TrimSpace(principal), strings.TrimSpace(token)
		if !ok || principal == "" || token == "" {
			return nil, fmt.Errorf("tokens file line %d: want principal:token", line)
		}
		if len(token) < tokenBytesMin {
			// The token itself is never printed: the message goes to logs.
			return nil, fmt.Errorf("tokens file line %d: principal %q: token shorter than %d bytes", line, principal, tokenBytesMin)
		}
		if _, dup := out[token]; dup {
			return nil, fmt.Errorf("tokens file line %d: token listed twice", line)
		}
		if len(out) >= tokensMax {
			return nil, fmt.Errorf("tokens file: more than %d tokens", tokensMax)
		}
		out[token] = principal
	}
	return out, sc.Err()
}

// tokenSet maps token → principal. A set is never changed once a Server
// holds it: SetTokens swaps in another whole, so a request sees the old set
// or the new one, never a mix.
type tokenSet map[string]string

// authenticator maps a request's bearer token to its principal, and
// says which principals are operators (admin.go).
type authenticator struct {
	opts   *Options
	tokens atomic.Pointer[tokenSet] // nil: every request is Anonymous
}

// SetTokens replaces the bearer tokens (token → principal) at once, for a
// reload of the tokens file: requests already authenticated keep their
// principal, later ones are checked against the new set. It refuses, and
// keeps the set in force, an empty set or a token shorter than
// tokenBytesMin, and a server built without tokens: turning
// authentication on is a restart, not a reload.
func (s *Server) SetTokens(tokens map[string]string) error { return s.auth.setTokens(tokens) }

func (s *authenticator) setTokens(tokens map[string]string) error {
	if s.tokens.Load() == nil {
		return errors.New("the server was started without tokens (every request is \"" + Anonymous + "\"); restart it with tokens to require them")
	}
	if len(tokens) == 0 {
		return errors.New("no token: every request would be refused")
	}
	set := make(tokenSet, len(tokens))
	for token, principal := range tokens {
		if len(token) < tokenBytesMin {
			return fmt.Errorf("principal %q: token shorter than %d bytes", principal, tokenBytesMin)
		}
		set[token] = principal
	}
	s.tokens.Store(&set)
	return nil
}

// anonymous reports whether the server has no tokens: every request is
// the single principal Anonymous.
func (s *authenticator) anonymous() bool { return s.tokens.Load() == nil }

type principalKey struct{}

func principalOf(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// authenticate maps `Authorization: Bearer <token>` to a principal. With
// no tokens configured every request is Anonymous.
func (s *authenticator) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		principal := Anonymous
		if set := s.tokens.Load(); set != nil {
			token, ok := bearerToken(r.Header.Get("Authorization"))
			p, known := (*set)[token]
			if !ok || !known {
				w.Header().Set("WWW-Authenticate", `Bearer realm="idem"`)
				writeCodeError(w, code.Errorf(code.Unauthenticated, "a valid Authorization: Bearer token is required"))
				return
			}
			principal = p
		}
		next.ServeHTTP(w, withPrincipal(r, principal))
	})
}

// bearerToken extracts the token of `Authorization: Bearer <token>`. The
// scheme is matched case-insensitively (RFC 9110 §11.1).
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
