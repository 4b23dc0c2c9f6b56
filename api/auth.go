package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/idemdb/idem/code"
)

// Anonymous is the single principal when no tokens file is configured.
const Anonymous = "anonymous"

// TokensMax bounds the entries of a tokens file.
const TokensMax = 100000

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
		if _, dup := out[token]; dup {
			return nil, fmt.Errorf("tokens file line %d: token listed twice", line)
		}
		if len(out) >= TokensMax {
			return nil, fmt.Errorf("tokens file: more than %d tokens", TokensMax)
		}
		out[token] = principal
	}
	return out, sc.Err()
}

type principalKey struct{}

func principalOf(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// authenticate maps `Authorization: Bearer <token>` to a principal. With
// no tokens configured every request is Anonymous.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		principal := Anonymous
		if s.opts.Tokens != nil {
			token, ok := bearerToken(r.Header.Get("Authorization"))
			p, known := s.opts.Tokens[token]
			if !ok || !known {
				w.Header().Set("WWW-Authenticate", `Bearer realm="idem"`)
				writeCodeError(w, code.Errorf(code.Unauthenticated, "a valid Authorization: Bearer token is required"))
				return
			}
			principal = p
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, principal)))
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
