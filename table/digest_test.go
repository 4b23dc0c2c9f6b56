package table_test

import (
	"bytes"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/idemdb/idem/table"
)

func digestsOf(t *testing.T, body string) []byte {
	t.Helper()
	b, err := table.DecodeBatch([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	lists, d, ok := table.ParseEntryDigests(b.EntryDigests())
	if !ok || lists != [3]int{len(b.Inserts), len(b.Deletes), len(b.Transforms)} ||
		len(d) != min(b.Entries(), table.EntryDigestsMax)*table.EntryDigestBytes {
		t.Fatalf("lists %v, %d digest bytes for %d entries (ok %v)", lists, len(d), b.Entries(), ok)
	}
	return d
}

func entry(d []byte, i int) []byte {
	return d[i*table.EntryDigestBytes : (i+1)*table.EntryDigestBytes]
}

// TestEntryDigests_OnlyTheChangedEntryChanges: every entry has its own
// digest; changing one entry — its document, its ops, its ID — changes
// that digest alone, even where documents hold the lists' own names.
func TestEntryDigests_OnlyTheChangedEntryChanges(t *testing.T) {
	base := `{"inserts":[{"id":"a","doc":{"deletes":["x"],"s":"}\""}},{"id":"b","doc":{"n":1}}],` +
		`"deletes":["c","d~e"],"transforms":[{"id":"f","ops":[{"op":"$inc","path":"n","value":1}]}]}`
	variants := map[int]string{
		1: `{"inserts":[{"id":"a","doc":{"deletes":["x"],"s":"}\""}},{"id":"b","doc":{"n":2}}],` +
			`"deletes":["c","d~e"],"transforms":[{"id":"f","ops":[{"op":"$inc","path":"n","value":1}]}]}`,
		3: `{"inserts":[{"id":"a","doc":{"deletes":["x"],"s":"}\""}},{"id":"b","doc":{"n":1}}],` +
			`"deletes":["c","d~f"],"transforms":[{"id":"f","ops":[{"op":"$inc","path":"n","value":1}]}]}`,
		4: `{"inserts":[{"id":"a","doc":{"deletes":["x"],"s":"}\""}},{"id":"b","doc":{"n":1}}],` +
			`"deletes":["c","d~e"],"transforms":[{"id":"f","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`,
	}
	d0 := digestsOf(t, base)
	for changed, body := range variants {
		d := digestsOf(t, body)
		for i := range 5 {
			same := bytes.Equal(entry(d0, i), entry(d, i))
			if same == (i == changed) {
				t.Errorf("variant %d: entry %d digest same=%v", changed, i, same)
			}
		}
	}
	// The same batch written differently (key order, spacing) digests the same.
	if d := digestsOf(t, `{"transforms":[{"ops":[{"value":1,"path":"n","op":"$inc"}],"id":"f"}], "deletes":["c","d~e"],`+
		`"inserts":[{"doc":{"s":"}\"","deletes":["x"]},"id":"a"},{"id":"b","doc":{"n":1}}]}`); !bytes.Equal(d, d0) {
		t.Error("a canonically equal batch digests differently")
	}
	// The ID digest leads each entry.
	b, _ := table.DecodeBatch([]byte(base))
	for i := range b.Entries() {
		list, _, id := b.Entry(i)
		if got, want := entry(d0, i)[:2], table.IDDigest(list, id); got[0] != byte(want>>8) || got[1] != byte(want) {
			t.Errorf("entry %d: ID digest %x, want %04x", i, got, want)
		}
	}
}

func TestEntryDigests_BoundedByEntryDigestsMax(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString(`{"deletes":[`)
	for i := range table.EntryDigestsMax + 10 {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`"d` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `"`)
	}
	buf.WriteString(`]}`)
	if d := digestsOf(t, buf.String()); len(d) != table.EntryDigestsMax*table.EntryDigestBytes {
		t.Fatalf("%d bytes", len(d))
	}
}

// TestDocKeys_AreDocKeyAndIntentKey: the keys a shard carves from one
// buffer equal the keys built apart, and none can grow into another: an
// append to one leaves every other as it was. The keys of a second staging
// (more keys than the documents) come from a buffer of their own.
func TestDocKeys_AreDocKeyAndIntentKey(t *testing.T) {
	ids := []string{"doc-1", "b", strings.Repeat("q", 40)}
	docs, intents := table.DocKeysForTest("tid", 7, append(ids, ids...)...)
	for i, id := range append(ids, ids...) {
		doc, intent := docs[i], intents[i]
		if string(doc) != "tbl/v1/tid/7/"+id || string(intent) != "intent/v1/tid/7/"+id || cap(doc) != len(doc) || cap(intent) != len(intent) {
			t.Fatalf("%d: %q (cap %d) %q (cap %d)", i, doc, cap(doc), intent, cap(intent))
		}
		_ = append(doc, 'X')
		_ = append(intent, 'Y')
	}
	for i, id := range append(ids, ids...) {
		if string(docs[i]) != "tbl/v1/tid/7/"+id || string(intents[i]) != "intent/v1/tid/7/"+id {
			t.Fatalf("%d changed by an append to another key: %q %q", i, docs[i], intents[i])
		}
	}
}

// TestShardOf_IsFNV1a: documents stay on the shard they were written to —
// the in-place hash is hash/fnv's FNV-1a, value for value.
func TestShardOf_IsFNV1a(t *testing.T) {
	for _, id := range []string{"a", "doc-1", "~x.y:z@w", strings.Repeat("q", 128)} {
		h := fnv.New32a()
		h.Write([]byte(id))
		for _, n := range []int{1, 3, 16, 1024} {
			if got, want := table.ShardOf(id, n), int(h.Sum32()%uint32(n)); got != want {
				t.Fatalf("ShardOf(%q, %d) = %d, hash/fnv says %d", id, n, got, want)
			}
		}
	}
}
