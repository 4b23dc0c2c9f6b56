package idem

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"

	"github.com/idemdb/idem/sdk/go/idemapi"
)

// specCodes are the ErrorCode constants the generated layer declares: the
// spec's ErrorCode enum (make generated-check keeps the file fresh, and
// the server's api tests hold the enum to its code registry).
func specCodes(t *testing.T) []idemapi.ErrorCode {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "idemapi/idemapi.gen.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []idemapi.ErrorCode
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Values) != 1 {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "ErrorCode" {
			return true
		}
		if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			s, _ := strconv.Unquote(lit.Value)
			codes = append(codes, idemapi.ErrorCode(s))
		}
		return true
	})
	if len(codes) == 0 {
		t.Fatal("no ErrorCode constants in the generated layer")
	}
	return codes
}

// TestErrors_OneSentinelPerCode: every code of the spec has a sentinel
// that errors.Is matches, and there are no others.
func TestErrors_OneSentinelPerCode(t *testing.T) {
	codes := specCodes(t)
	for _, c := range codes {
		err := &Error{Code: c}
		found := false
		for _, s := range sentinels {
			if errors.Is(err, s) {
				found = true
			}
		}
		if !found {
			t.Errorf("the spec's code %s has no sentinel in the SDK", c)
		}
	}
	if len(sentinels) != len(codes) {
		t.Errorf("%d sentinels for %d codes", len(sentinels), len(codes))
	}
}
