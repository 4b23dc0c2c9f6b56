// Package sdktest holds the Go SDK's tests against a real idemd, which
// build the server from this repository: a module of its own, so that the
// SDK's module (sdk/go) requires nothing of the server's module graph.
// Its go.mod also pins the SDK's generator, oapi-codegen (make generate).
package sdktest
