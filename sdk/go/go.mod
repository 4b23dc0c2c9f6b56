module github.com/idemdb/idem/sdk/go

go 1.26.0

// The SDK alone: oapi-codegen's runtime and nothing of the server's module
// graph, so that a program using it gets only these in its go.sum. Its
// tests against a real idemd, and the generator (a tool), are the module
// sdk/go/sdktest's.
require github.com/oapi-codegen/runtime v1.9.0

require (
	github.com/apapsch/go-jsonmerge/v2 v2.0.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
)
