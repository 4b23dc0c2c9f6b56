package receipt

import (
	"strconv"

	"github.com/idemdb/idem/store"
)

// Formats are the stored records' schemas, the same in an embedded data
// directory and under an etcd prefix: what this build writes and reads
// (docs/upgrading.md). Records are CBOR maps with integer keys and decode
// additively (an unknown field is ignored, a missing one is zero), so a
// schema number changes only when a reader must tell two meanings apart.
func Formats() []store.Format {
	schema := func(n int) string { return "schema" + strconv.Itoa(n) }
	return []store.Format{
		{Name: "receipt record", Writes: schema(SchemaCurrent), Reads: []string{schema(Schema1), schema(Schema2), schema(Schema3), schema(Schema4)}},
		{Name: "session record", Writes: schema(sessionSchemaCurrent), Reads: []string{schema(sessionSchemaCurrent)}},
	}
}
