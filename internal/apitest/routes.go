package apitest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"sort"
	"strconv"
)

// ServerRoutes returns the patterns an api/server.go file registers with
// s.route, sorted, read from the source so that a new route cannot be
// missed by the tests that compare the routes with the spec and the
// metrics.
func ServerRoutes(serverGo string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), serverGo, nil, 0)
	if err != nil {
		return nil, err
	}
	var out []string
	var bad error
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || bad != nil {
			return bad == nil
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "route" || len(call.Args) != 2 {
			return true
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			bad = fmt.Errorf("%s: s.route with a non-literal pattern at offset %d", serverGo, call.Pos())
			return false
		}
		p, err := strconv.Unquote(lit.Value)
		if err != nil {
			bad = err
			return false
		}
		out = append(out, p)
		return true
	})
	sort.Strings(out)
	return out, bad
}
