package table

// DocKeysForTest hands out the keys of ids from one Shard of table tableID,
// as staging does, in order.
func DocKeysForTest(tableID string, shard int, ids ...string) (docs, intents [][]byte) {
	s := &Shard{meta: Meta{ID: tableID}, shard: shard}
	for _, id := range ids {
		s.docs = append(s.docs, docWork{id: id})
	}
	for _, id := range ids {
		d, i := s.docKeys(id)
		docs, intents = append(docs, d), append(intents, i)
	}
	return docs, intents
}

// The bounds and the digest that package table_test's tests exceed or
// check, which no other package names.
const (
	DocIDBytesMax   = docIDBytesMax
	DocBytesMax     = docBytesMax
	TransformOpsMax = transformOpsMax
	PathDepthMax    = pathDepthMax
	PathBytesMax    = pathBytesMax
	DocDepthMax     = docDepthMax
	NumberDigitsMax = numberDigitsMax
)

// IDDigest is idDigest, for the digest tests of package table_test.
var IDDigest = idDigest
