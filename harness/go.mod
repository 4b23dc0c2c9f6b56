module github.com/idemdb/idem/harness

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/fxamacker/cbor/v2 v2.10.0
	github.com/idemdb/idem v0.0.0-00010101000000-000000000000
)

require (
	github.com/pingcap/errors v0.11.4 // indirect
	github.com/pingcap/failpoint v0.0.0-20240528011301-b51a646c7c86 // indirect
	github.com/stretchr/testify v1.9.0 // indirect
	github.com/tidwall/gjson v1.10.2 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
	github.com/tidwall/tinylru v1.1.0 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/tools v0.49.0 // indirect
)

// The harness checks the idem module it sits in: the root, never a
// published version. go.work (repo root) does the same; this replace keeps
// GOWORK=off builds of harness alone working.
replace github.com/idemdb/idem => ..
