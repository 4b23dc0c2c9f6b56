package docscheck

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"path"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/idemdb/idem"

// consts evaluates the constant declarations of the repository's packages
// from source, without type checking: literals, operators, parentheses,
// conversions, other constants of the same package or of another package
// of the repository, and time's units. That covers how bounds are written
// here (`64 << 20`, `30 * 24 * time.Hour`, `table.SessionTablesMax`), and
// reaches unexported defaults that no test outside their package can see.
type consts struct {
	decls map[string]map[string]constDecl // package dir → name → declaration
	memo  map[string]constant.Value       // "dir.name" → value
}

type constDecl struct {
	expr    ast.Expr
	imports map[string]string // local name → package dir; "time" for the standard one
}

var timeUnits = map[string]int64{"Nanosecond": 1, "Microsecond": 1e3, "Millisecond": 1e6, "Second": 1e9, "Minute": 60e9, "Hour": 3600e9}

// loadConsts parses every non-test Go file of the repository.
func loadConsts(t *testing.T, root string) *consts {
	t.Helper()
	c := &consts{decls: map[string]map[string]constDecl{}, memo: map[string]constant.Value{}}
	fset := token.NewFileSet()
	walkFiles(t, root, []string{".go"}, func(rel string) {
		if strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(rel, "sdk/") {
			return
		}
		f, err := parser.ParseFile(fset, root+"/"+rel, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		c.add(path.Dir(rel), f)
	})
	return c
}

func (c *consts) add(dir string, f *ast.File) {
	imports := fileImports(f)
	if c.decls[dir] == nil {
		c.decls[dir] = map[string]constDecl{}
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) { // iota repetitions are left out: never quoted as bounds
					c.decls[dir][n.Name] = constDecl{expr: vs.Values[i], imports: imports}
				}
			}
		}
	}
}

// fileImports maps f's local package names to package dirs of the
// repository ("time" for the standard one).
func fileImports(f *ast.File) map[string]string {
	imports := map[string]string{}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := path.Base(p)
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = strings.TrimPrefix(strings.TrimPrefix(p, modulePath), "/")
	}
	return imports
}

// value is the constant dir.name, or an error saying why it cannot be had.
func (c *consts) value(dir, name string) (constant.Value, error) {
	k := dir + "." + name
	if v, ok := c.memo[k]; ok {
		if v == nil {
			return nil, fmt.Errorf("%s: defined in terms of itself", k)
		}
		return v, nil
	}
	d, ok := c.decls[dir][name]
	if !ok {
		return nil, fmt.Errorf("no constant %s in %s", name, dir)
	}
	c.memo[k] = nil
	v, err := c.eval(dir, d, d.expr)
	if err != nil {
		delete(c.memo, k)
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	c.memo[k] = v
	return v, nil
}

func (c *consts) eval(dir string, d constDecl, e ast.Expr) (constant.Value, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		return constant.MakeFromLiteral(e.Value, e.Kind, 0), nil
	case *ast.ParenExpr:
		return c.eval(dir, d, e.X)
	case *ast.Ident:
		return c.value(dir, e.Name)
	case *ast.SelectorExpr:
		return c.selector(d, e)
	case *ast.UnaryExpr:
		x, err := c.eval(dir, d, e.X)
		if err != nil {
			return nil, err
		}
		return constant.UnaryOp(e.Op, x, 0), nil
	case *ast.BinaryExpr:
		return c.binary(dir, d, e)
	case *ast.CallExpr: // a conversion such as time.Duration(5)
		if len(e.Args) == 1 {
			return c.eval(dir, d, e.Args[0])
		}
	}
	return nil, fmt.Errorf("cannot evaluate %T", e)
}

func (c *consts) selector(d constDecl, e *ast.SelectorExpr) (constant.Value, error) {
	pkg, ok := e.X.(*ast.Ident)
	if !ok {
		return nil, fmt.Errorf("cannot evaluate %T", e.X)
	}
	if d.imports[pkg.Name] == "time" {
		if u, ok := timeUnits[e.Sel.Name]; ok {
			return constant.MakeInt64(u), nil
		}
	}
	other, ok := d.imports[pkg.Name]
	if !ok {
		return nil, fmt.Errorf("unknown package %s", pkg.Name)
	}
	return c.value(other, e.Sel.Name)
}

func (c *consts) binary(dir string, d constDecl, e *ast.BinaryExpr) (constant.Value, error) {
	x, err := c.eval(dir, d, e.X)
	if err != nil {
		return nil, err
	}
	y, err := c.eval(dir, d, e.Y)
	if err != nil {
		return nil, err
	}
	switch e.Op {
	case token.SHL, token.SHR:
		s, _ := constant.Uint64Val(y)
		return constant.Shift(x, e.Op, uint(s)), nil
	case token.QUO:
		if x.Kind() == constant.Int && y.Kind() == constant.Int {
			return constant.BinaryOp(x, token.QUO_ASSIGN, y), nil // integer division
		}
	}
	return constant.BinaryOp(x, e.Op, y), nil
}
