// Package idemapi is the HTTP client generated from api/openapi.yaml by
// oapi-codegen (idemapi.gen.go; do not edit it: `make generate`, which
// make test checks). Package
// idem, one level up, is the client to use: keys, retries and typed
// errors over this one.
package idemapi
