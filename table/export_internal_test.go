package table

// DocKeysForTest exposes docKeys to the external tests.
var DocKeysForTest = docKeys
