package docscheck

import (
	"regexp"
	"sort"
	"strings"
	"testing"
)

const designDoc = "docs/design.md"

var (
	// A heading of docs/design.md: "## 5. The keyed…" or "### 5.4 Create…".
	designHeading = regexp.MustCompile(`(?m)^#{2,3} (\d+(?:\.\d+)*)\.? `)
	// A citation: "docs/design.md §5.4", or "docs/design.md §4–§7" (the contract's
	// numbers, which design.md keeps), with further "§n" joined to it.
	citation = regexp.MustCompile(`(?:docs/design\.md|DESIGN)\s+(§\d+(?:\.\d+)*(?:(?:, |–|-| and | or |/)§\d+(?:\.\d+)*)*)`)
	// Inside design.md, a bare "§n" is a cross-reference.
	sectionRef = regexp.MustCompile(`§(\d+(?:\.\d+)*)`)
)

// designSections is the set of section numbers docs/design.md has.
func designSections(t *testing.T, root string) map[string]bool {
	t.Helper()
	secs := map[string]bool{}
	for _, m := range designHeading.FindAllStringSubmatch(readFile(t, root, designDoc), -1) {
		secs[m[1]] = true
	}
	for i := 1; i <= 15; i++ { // the contract's numbering, which code cites
		if !secs[itoa(i)] {
			t.Errorf("%s has no section %d: code cites the contract's §1–§15 by number", designDoc, i)
		}
	}
	return secs
}

// TestDesign_EverySectionCitedExists: every "docs/design.md §n" and
// "docs/design.md §n" in the code and the docs, and every "§n" inside design.md,
// names a section design.md has.
func TestDesign_EverySectionCitedExists(t *testing.T) {
	root := repoRoot(t)
	secs := designSections(t, root)
	cited := 0
	bad := map[string][]string{}
	walkFiles(t, root, []string{".go", ".md", ".yaml", ".py", ".ts"}, func(rel string) {
		text := readFile(t, root, rel)
		var refs []string
		for _, m := range citation.FindAllStringSubmatch(text, -1) {
			for _, r := range sectionRef.FindAllStringSubmatch(m[1], -1) {
				refs = append(refs, r[1])
			}
		}
		if rel == designDoc {
			for _, r := range sectionRef.FindAllStringSubmatch(text, -1) {
				refs = append(refs, r[1])
			}
		}
		for _, r := range refs {
			cited++
			if !secs[r] {
				bad[r] = append(bad[r], rel)
			}
		}
	})
	if cited == 0 {
		t.Fatal("no citation found: the check is vacuous")
	}
	var missing []string
	for r, files := range bad {
		missing = append(missing, "§"+r+" (cited in "+strings.Join(uniq(files), ", ")+")")
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s has no section %s", designDoc, m)
	}
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
