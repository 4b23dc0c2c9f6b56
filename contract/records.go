package contract

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/idemdb/idem/internal/apitest"
)

// ReadRecords reads every record of the .jsonl files in dir.
func ReadRecords(dir string) ([]apitest.Record, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []apitest.Record
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<30) // a line holds whole bodies
		for line := 1; sc.Scan(); line++ {
			var rec apitest.Record
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				f.Close()
				return nil, fmt.Errorf("%s:%d: %w", name, line, err)
			}
			out = append(out, rec)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return out, nil
}

// Mismatch is a recorded exchange the spec does not allow; N counts the
// records with the same test, request line, status and error.
type Mismatch struct {
	Rec apitest.Record
	Err error
	N   int
}

func (m Mismatch) String() string {
	what := fmt.Sprintf("%s %s → %d", m.Rec.Method, m.Rec.URI, m.Rec.Status)
	if m.Rec.Kind == apitest.KindUnparsable {
		what = fmt.Sprintf("(unparsable request) → %d", m.Rec.Status)
	}
	times := ""
	if m.N > 1 {
		times = fmt.Sprintf(" (%d times)", m.N)
	}
	return fmt.Sprintf("%s %s: %s%s does not match %s:\n\t%v\n\tresponse body: %s",
		m.Rec.Package, m.Rec.Test, what, times, SpecFile, strings.ReplaceAll(m.Err.Error(), "\n", "\n\t"), clip(m.Rec.Body))
}

// CheckRecords checks every record and returns the mismatches, identical
// ones (same test, request line, status and error) merged.
func (s *Spec) CheckRecords(recs []apitest.Record) []Mismatch {
	var out []Mismatch
	seen := map[string]int{}
	for _, rec := range recs {
		err := s.CheckRecord(rec)
		if err == nil {
			continue
		}
		k := strings.Join([]string{rec.Package, rec.Test, rec.Kind, rec.Method, rec.URI, fmt.Sprint(rec.Status), err.Error()}, "\x00")
		if i, ok := seen[k]; ok {
			out[i].N++
			continue
		}
		seen[k] = len(out)
		out = append(out, Mismatch{Rec: rec, Err: err, N: 1})
	}
	return out
}
