package docscheck

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/idemdb/idem/code"
)

var (
	// "`CleanScanMax` (4 096", "`SegmentBytes` 8 MiB", "`store.BatchOpsMax` 16 384",
	// "`cleanPassesMax` 64".
	quotedConst = regexp.MustCompile("`((?:[a-z]+\\.)?[A-Za-z]\\w*)`\\s+\\(?(\\d[\\d \u2009\u202f]*(?:\\.\\d+)?)(?: ?(KiB|MiB|GiB|B|ns|µs|ms|s|min|h|days)\\b)?")
	// "`table_not_found` 404".
	quotedCode = regexp.MustCompile("`([a-z][a-z_]*)`\\s+\\(?(\\d{3})\\b")
	// A table row of a flag and its default: "| `-header-timeout` | 5 s |".
	quotedFlagDefault = regexp.MustCompile("(?m)^\\|\\s*`-([a-z][a-z0-9-]*)`[^|\\n]*\\|\\s*(\\d[\\d \u2009\u202f]*(?:\\.\\d+)?)(?: ?(KiB|MiB|GiB|B|ns|µs|ms|s|min|h|days)\\b)?")
)

// optionDefaults maps option fields design.md quotes with their default to
// the unexported constant the default comes from.
var optionDefaults = map[string]string{
	"QueueEntriesMax":     "wal.defaultQueueEntriesMax",
	"GroupEntriesMax":     "wal.defaultGroupEntriesMax",
	"GroupBytesMax":       "wal.defaultGroupBytesMax",
	"SegmentBytes":        "wal.defaultSegmentBytes",
	"CheckpointLogBytes":  "engine.defaultCheckpointLogBytes",
	"CheckpointPartBytes": "engine.defaultCheckpointPartBytes",
	"CheckpointDeltasMax": "engine.defaultCheckpointDeltasMax",
	"ValueLogGCLiveRatio": "engine.defaultVlogGCLiveRatio",
	"ScanItemsMax":        "store/etcd.DefaultScanItemsMax",
}

// plannedCodes are codes §15 designs and the registry does not have yet.
var plannedCodes = map[string]bool{"store_full": true, "key_may_have_executed": true}

var units = map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
	"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9, "min": 60e9, "h": 3600e9, "days": 86400e9}

// quotingDocs are the docs whose quoted constants are checked: the design
// and the topic docs a maintainer reads as current (deviations.md is
// history).
var quotingDocs = []string{designDoc, "docs/engine.md", "docs/receipts.md", "docs/sessions.md",
	"docs/limits.md", "docs/etcd.md", "docs/cluster.md", "docs/harness.md", "docs/operations.md",
	"docs/benchmarks.md", "README.md"}

// TestDocs_QuotedConstantsAreTheCodes: every named constant the docs quote
// with a number has that value in the code (durations in their unit, sizes
// in KiB/MiB).
func TestDocs_QuotedConstantsAreTheCodes(t *testing.T) {
	root := repoRoot(t)
	c := loadConsts(t, root)
	checked := 0
	for _, doc := range quotingDocs {
		for _, m := range quotedConst.FindAllStringSubmatch(readFile(t, root, doc), -1) {
			name, num, unit := m[1], strings.Map(dropSpace, m[2]), m[3]
			if !constName(name) {
				continue
			}
			got, err := c.resolve(name)
			if err != nil {
				t.Errorf("%s quotes `%s` %s %s: %v", doc, name, m[2], unit, err)
				continue
			}
			want := constant.BinaryOp(constant.MakeFromLiteral(num, literalKind(num), 0), token.MUL, constant.MakeInt64(units[unit]))
			if !constant.Compare(constant.ToFloat(got), token.EQL, constant.ToFloat(want)) {
				t.Errorf("%s quotes `%s` as %s %s; the code has %s", doc, name, strings.TrimSpace(m[2]), unit, got.ExactString())
			}
			checked++
		}
	}
	t.Logf("%d quoted constants checked", checked)
	if checked < 20 {
		t.Fatalf("only %d quoted constants found: the pattern no longer matches the docs", checked)
	}
}

// idemdDir is where idemd declares its flags.
const idemdDir = "cmd/idemd"

// TestDocs_QuotedFlagDefaultsAreIdemds: every idemd flag a doc's table
// gives a numeric default has that default in cmd/idemd (durations in
// their unit, sizes in KiB/MiB).
func TestDocs_QuotedFlagDefaultsAreIdemds(t *testing.T) {
	root := repoRoot(t)
	defaults := flagDefaults(t, root, loadConsts(t, root))
	checked := 0
	for _, doc := range quotingDocs {
		for _, m := range quotedFlagDefault.FindAllStringSubmatch(readFile(t, root, doc), -1) {
			name, num, unit := m[1], strings.Map(dropSpace, m[2]), m[3]
			got, ok := defaults[name]
			if !ok {
				t.Errorf("%s gives `-%s` the default %s %s: idemd declares no such flag with a constant default", doc, name, m[2], unit)
				continue
			}
			want := constant.BinaryOp(constant.MakeFromLiteral(num, literalKind(num), 0), token.MUL, constant.MakeInt64(units[unit]))
			if !constant.Compare(constant.ToFloat(got), token.EQL, constant.ToFloat(want)) {
				t.Errorf("%s gives `-%s` the default %s %s; cmd/idemd has %s", doc, name, strings.TrimSpace(m[2]), unit, got.ExactString())
			}
			checked++
		}
	}
	t.Logf("%d quoted flag defaults checked", checked)
	if checked < 5 {
		t.Fatalf("only %d quoted flag defaults found: the pattern no longer matches the docs", checked)
	}
}

// flagDefaults evaluates the default of every numeric flag idemd declares
// with a constant expression — fs.IntVar(&v, "name", default, usage) or
// fs.Int("name", default, usage) — by flag name. A default computed at run
// time is left out.
func flagDefaults(t *testing.T, root string, c *consts) map[string]constant.Value {
	t.Helper()
	out := map[string]constant.Value{}
	fset := token.NewFileSet()
	for _, file := range packageFiles(t, root, idemdDir) {
		f, err := parser.ParseFile(fset, filepath.Join(root, idemdDir, file), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		d := constDecl{imports: fileImports(f)}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !numericFlagCall(call) {
				return true
			}
			at := 0
			if strings.HasSuffix(call.Fun.(*ast.SelectorExpr).Sel.Name, "Var") {
				at = 1
			}
			lit, ok := call.Args[at].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			name, _ := strconv.Unquote(lit.Value)
			if v, err := c.eval(idemdDir, d, call.Args[at+1]); err == nil {
				out[name] = v
			}
			return true
		})
	}
	return out
}

// numericFlagCall says whether call declares a numeric flag on a FlagSet.
func numericFlagCall(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	switch strings.TrimSuffix(sel.Sel.Name, "Var") {
	case "Int", "Int64", "Uint", "Uint64", "Float64", "Duration":
		return len(call.Args) == 3 || len(call.Args) == 4 && strings.HasSuffix(sel.Sel.Name, "Var")
	}
	return false
}

// constName tells a Go constant's name from an answer code or a word (all
// lower case), an environment variable (all upper case) and a test's or a
// benchmark's name.
func constName(name string) bool {
	_, id, ok := strings.Cut(name, ".")
	if !ok {
		id = name
	}
	return strings.ToLower(id) != id && strings.ToUpper(id) != id && !strings.HasPrefix(id, "Test") && !strings.HasPrefix(id, "Benchmark")
}

// resolve finds the constant a design.md name stands for.
func (c *consts) resolve(name string) (constant.Value, error) {
	if src, ok := optionDefaults[name]; ok {
		pkg, id, _ := strings.Cut(src, ".")
		return c.value(pkg, id)
	}
	pkg, id, qualified := strings.Cut(name, ".")
	if !qualified {
		pkg, id = "", name
	}
	var found []string
	for dir, decls := range c.decls {
		// A qualified name may reach a command's package too (idemd.idleTimeout).
		if _, ok := decls[id]; ok && (pkg == "" && libraryDir(dir) || path.Base(dir) == pkg) {
			found = append(found, dir)
		}
	}
	switch len(found) {
	case 0:
		return nil, errNo("no such constant in the library")
	case 1:
		return c.value(found[0], id)
	}
	return nil, errNo("ambiguous, in " + strings.Join(found, " and ") + ": qualify it")
}

// libraryDir leaves out what links no library code: tests' and tools'
// modules, vendored code.
func libraryDir(dir string) bool {
	for _, p := range []string{"cmd/", "harness", "etcdtest", "contract", "internal/tidwall", "internal/btree", "sdk/"} {
		if strings.HasPrefix(dir, p) {
			return false
		}
	}
	return true
}

// TestDesign_AnswerCodesAreTheRegistrys: every answer code docs/design.md
// quotes with a status has that status in package code, and every
// registered code is in design.md.
func TestDesign_AnswerCodesAreTheRegistrys(t *testing.T) {
	root := repoRoot(t)
	quoted := map[code.Code]bool{}
	for _, m := range quotedCode.FindAllStringSubmatch(readFile(t, root, designDoc), -1) {
		c, status := code.Code(m[1]), m[2]
		switch {
		case code.Known(c):
			quoted[c] = true
			if want := strconv.Itoa(code.Lookup(c).Status); status != want {
				t.Errorf("%s gives `%s` status %s; code/code.go has %s", designDoc, c, status, want)
			}
		case strings.Contains(m[1], "_") && !plannedCodes[m[1]]:
			t.Errorf("%s quotes `%s` %s, which code/code.go does not register", designDoc, c, status)
		}
	}
	for _, c := range code.All() {
		if !quoted[c] {
			t.Errorf("code %s is registered but %s does not list it with its status", c, designDoc)
		}
	}
}

type errNo string

func (e errNo) Error() string { return string(e) }

func dropSpace(r rune) rune {
	if r == ' ' || r == '\u2009' || r == '\u202f' {
		return -1
	}
	return r
}

func literalKind(num string) token.Token {
	if strings.Contains(num, ".") {
		return token.FLOAT
	}
	return token.INT
}
