package receipt

// The unexported bound, schema and encoder receipt_test's corruption,
// format and tombstone tests build with.
const (
	CleanBatchMax        = cleanBatchMax
	SessionSchemaCurrent = sessionSchemaCurrent
)

var EncodeSession = encodeSession
