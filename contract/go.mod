module github.com/idemdb/idem/contract

go 1.26.0

require (
	github.com/getkin/kin-openapi v0.153.0
	github.com/idemdb/idem v0.0.0-00010101000000-000000000000
)

require (
	github.com/go-openapi/jsonpointer v0.22.5 // indirect
	github.com/go-openapi/swag/jsonname v0.25.5 // indirect
	github.com/gorilla/mux v1.8.0 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	go.yaml.in/yaml/v4 v4.0.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

// The contract checks the idem module it sits in: the root, never a
// published version. go.work (repo root) does the same; this replace keeps
// GOWORK=off runs of the contract alone working.
replace github.com/idemdb/idem => ..
