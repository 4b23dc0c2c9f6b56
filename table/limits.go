// Package table holds tables and their JSON documents: hash shards,
// transform ops, preflight validation, the fast-path atomic batch, document
// reads that never see uncommitted intents, and the participant side of 2PC
// (intents on one shard). JSON itself — the strict parser, the canonical
// form fingerprints are made of, number literals — is internal/canonjson's;
// what documents mean (ops, exact arithmetic on their numbers) is here.
package table

import (
	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/internal/canonjson"
)

// Limits. Each is checked in preflight, before anything is written.
const (
	// TableNameBytesMax bounds a table name: 1..64 of [A-Za-z0-9_-].
	TableNameBytesMax = 64
	// docIDBytesMax bounds a document ID: 1..128 of [A-Za-z0-9_.:@~-].
	docIDBytesMax = 128
	// docBytesMax bounds one document's JSON encoding, before and after a
	// transform.
	docBytesMax = 64 << 10
	// BatchDocsMax bounds the documents one batch touches.
	BatchDocsMax = 1000
	// transformOpsMax bounds the ops of one transform.
	transformOpsMax = 64
	// pathDepthMax and pathBytesMax bound a dotted path.
	pathDepthMax = 16
	pathBytesMax = 256
	// ShardsMax bounds a table's shard count; DefaultShards is used when 0.
	ShardsMax     = 256
	DefaultShards = 4
	// docDepthMax bounds the nesting of a document ({} and [] are one
	// level each), counted from the document itself, whether it is sent in
	// an insert, as an op value or built by a transform. The parser
	// enforces it, so its value lives there.
	docDepthMax = canonjson.DepthMax
	// numberDigitsMax bounds the digits of a number literal before its
	// exponent (leading zeros included) and numberExponentMax its exponent;
	// they keep exact arithmetic cheap, and bind transform results too.
	numberDigitsMax   = canonjson.NumberDigitsMax
	numberExponentMax = canonjson.NumberExponentMax
	// FastRetriesMax bounds how often the fast path re-reads a document that
	// another writer changed between read and write before it reports a
	// conflict.
	FastRetriesMax = 8
)

// ValidTableName reports whether s is a valid table name.
func ValidTableName(s string) bool {
	if len(s) == 0 || len(s) > TableNameBytesMax {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validDocID reports whether s is a valid document ID: 1..DocIDBytesMax of
// A-Z a-z 0-9 _ . : @ ~ -, but not "." or "..", which HTTP clients
// normalise away, so that a document so named could never be read back.
func validDocID(s string) bool {
	if len(s) == 0 || len(s) > docIDBytesMax || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '.' || c == ':' || c == '@' || c == '~' || c == '-') {
			return false
		}
	}
	return true
}

func invalid(format string, args ...any) *code.Error {
	return code.Errorf(code.InvalidRequest, format, args...)
}
