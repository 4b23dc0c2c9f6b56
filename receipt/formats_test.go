package receipt_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// goldenSession is the schema-1 session record frozen in
// testdata/session-schema1.cbor: an open session with its owner and a
// staging header.
func goldenSession() receipt.SessionRecord {
	return receipt.SessionRecord{Schema: 1, Principal: "alice", State: receipt.SessionOpen,
		Owner: &lease.Claim{Node: "node-1", Incarnation: 7, Epoch: 1}, Created: msCreated, Expires: msCreated + 30_000,
		Staging: &table.Staging{}, Stages: 1}
}

// TestGolden_SessionSchemaDecodesForever: the frozen schema-1 session
// record decodes to exactly the record it was written from.
func TestGolden_SessionSchemaDecodesForever(t *testing.T) {
	path := filepath.Join("testdata", "session-schema1.cbor")
	want := goldenSession()
	if *update {
		b, err := receipt.EncodeSession(&want)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := receipt.DecodeSession(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("decoded\n %+v\nwant\n %+v", *got, want)
	}
}

// TestFormats_EveryVersionReadHasAFixture: for every record schema this
// build reads (receipt.Formats, what idemd -version prints), a frozen
// fixture of that schema is under testdata/, so a reader dropped or
// broken for an old schema fails a test.
func TestFormats_EveryVersionReadHasAFixture(t *testing.T) {
	prefix := map[string]string{"receipt record": "", "session record": "session-"}
	for _, f := range receipt.Formats() {
		p, ok := prefix[f.Name]
		if !ok {
			t.Fatalf("format %q: no fixture naming rule here; add one", f.Name)
		}
		if !strings.Contains(strings.Join(f.Reads, " "), f.Writes) {
			t.Errorf("%s: writes %s but does not read it", f.Name, f.Writes)
		}
		for _, v := range f.Reads {
			m, err := filepath.Glob(filepath.Join("testdata", p+v+"*.cbor"))
			if err != nil || len(m) == 0 {
				t.Errorf("%s %s: no fixture testdata/%s%s*.cbor", f.Name, v, p, v)
			}
		}
	}
}
