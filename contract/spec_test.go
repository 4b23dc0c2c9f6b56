package contract

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/internal/apitest"
)

// TestSpec_IsValidOpenAPI31 loads api/openapi.yaml with kin-openapi and
// validates it as an OpenAPI 3.1 document (JSON Schema 2020-12 schemas),
// patterns included.
func TestSpec_IsValidOpenAPI31(t *testing.T) {
	spec := MustLoad(t)
	if spec.Doc.OpenAPI != "3.1.0" || !spec.Doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q", spec.Doc.OpenAPI)
	}
	if err := spec.Doc.Validate(context.Background(), openapi3.EnableSchemaPatternValidation()); err != nil {
		t.Fatal(err)
	}
}

// serverRoutes returns the patterns api/server.go registers with s.route,
// read from the source so that a new route cannot be missed (api's
// TestServer_RoutesArePatterns checks that the mux routes each to itself).
func serverRoutes(t *testing.T) []string {
	t.Helper()
	root, err := apitest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	routes, err := apitest.ServerRoutes(filepath.Join(root, "api", "server.go"))
	if err != nil {
		t.Fatal(err)
	}
	return routes
}

var restWildcard = regexp.MustCompile(`\{([a-z]+)\.\.\.\}`)

// specRoutes returns "METHOD /path" for every operation of the spec, in
// ServeMux syntax ({name...} where the server routes the rest of the path).
func specRoutes(doc *openapi3.T, rest map[string]bool) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			p := path
			for name := range rest {
				p = strings.Replace(p, "{"+name+"}", "{"+name+"...}", 1)
			}
			out = append(out, method+" "+p)
		}
	}
	sort.Strings(out)
	return out
}

// TestSpec_OperationsAreServerRoutes: every route api/server.go registers
// is an operation of the spec and vice versa.
func TestSpec_OperationsAreServerRoutes(t *testing.T) {
	registered := serverRoutes(t)
	rest := map[string]bool{}
	for _, p := range registered {
		for _, m := range restWildcard.FindAllStringSubmatch(p, -1) {
			rest[m[1]] = true
		}
	}
	documented := specRoutes(MustLoad(t).Doc, rest)
	if strings.Join(registered, "\n") != strings.Join(documented, "\n") {
		t.Fatalf("routes differ\napi/server.go:\n  %s\nopenapi.yaml:\n  %s",
			strings.Join(registered, "\n  "), strings.Join(documented, "\n  "))
	}
	if len(registered) != 18 {
		t.Fatalf("%d routes: %v", len(registered), registered)
	}
}

// problemTypeBase prefixes each code to form the problem's type URI (api's
// TestProblem_TypeAndTitleAreTheRegistrys checks the server uses it).
const problemTypeBase = "urn:idem:problem:"

// TestSpec_ErrorCodesMatchRegistry: the spec's ErrorCode enum is exactly
// code.All(), and each code's Problem branch fixes the status, retryable,
// retry_with, type and title (code.Info.Title) the server renders; the
// ErrorCode description's table has each code's row.
func TestSpec_ErrorCodesMatchRegistry(t *testing.T) {
	schemas := MustLoad(t).Doc.Components.Schemas
	var enum []string
	for _, v := range schemas["ErrorCode"].Value.Enum {
		enum = append(enum, v.(string))
	}
	var all []string
	for _, c := range code.All() {
		all = append(all, string(c))
	}
	sort.Strings(enum)
	sort.Strings(all)
	if strings.Join(enum, ",") != strings.Join(all, ",") {
		t.Fatalf("ErrorCode enum %v\ncode.All() %v", enum, all)
	}
	branches := map[string]*openapi3.Schema{}
	for _, ref := range schemas["Problem"].Value.OneOf {
		b := ref.Value
		c, _ := b.Properties["code"].Value.Const.(string)
		if _, dup := branches[c]; dup || c == "" {
			t.Fatalf("Problem.oneOf branch %s: code %q missing or repeated", ref.Ref, c)
		}
		branches[c] = b
	}
	table := schemas["ErrorCode"].Value.Description
	for _, c := range code.All() {
		b := branches[string(c)]
		if b == nil {
			t.Errorf("no Problem.oneOf branch for %s", c)
			continue
		}
		info := code.Lookup(c)
		want := map[string]any{
			"status": float64(info.Status), "retryable": info.Retryable, "retry_with": string(info.RetryWith),
			"type": problemTypeBase + string(c), "title": info.Title,
		}
		for member, v := range want {
			got := b.Properties[member].Value.Const
			if member == "retry_with" && got == nil && b.Else != nil && b.Else.Value.Properties[member] != nil {
				// A code whose retry_with a session commit's answer
				// replaces (retry: new_session → none): the registry's
				// value is the else branch's.
				got = b.Else.Value.Properties[member].Value.Const
			}
			if n, ok := got.(int); ok {
				got = float64(n)
			}
			if n, ok := got.(uint64); ok {
				got = float64(n)
			}
			if fmt.Sprint(got) != fmt.Sprint(v) {
				t.Errorf("%s: spec %s = %v (%T), server %v", c, member, got, got, v)
			}
		}
		row := fmt.Sprintf("| %s | %d | %v | %s |", c, info.Status, info.Retryable, info.RetryWith)
		if !strings.Contains(table, row) {
			t.Errorf("ErrorCode description lacks the row %q", row)
		}
	}
}
