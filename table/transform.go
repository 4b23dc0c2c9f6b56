package table

import (
	"encoding/json"
	"errors"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/internal/canonjson"
)

// The transform ops.
const (
	OpSet      = "$set"      // set path to value, creating intermediate objects
	OpUnset    = "$unset"    // remove path; a missing path is a no-op
	OpInc      = "$inc"      // add a number exactly (number.go); a missing path is set to value
	OpMax      = "$max"      // keep the larger of current and value (numbers by value, or strings)
	OpMin      = "$min"      // keep the smaller
	OpAddToSet = "$addToSet" // append value to an array unless an equal element (numbers by value) exists
)

// applyTransform applies ops in order to doc (which it mutates). A type
// mismatch, such as $inc on a string, is a *code.Error invalid_request naming
// the op; the caller then writes nothing.
func applyTransform(doc map[string]any, id string, ops []Op) *code.Error {
	for i, op := range ops {
		if err := applyOp(doc, op); err != nil {
			return invalid("transform of %q, ops[%d] %s %q: %s", id, i, op.Op, op.Path, err)
		}
	}
	// The result must be a document an insert would accept: a transform
	// must not store what could not be sent back.
	if depthOf(doc, docDepthMax) > docDepthMax {
		return invalid("transform of %q: the result nests deeper than %d levels (the limit for any document)", id, docDepthMax)
	}
	return nil
}

// decodeObject decodes a stored document for a transform to work on.
func decodeObject(raw []byte) (map[string]any, error) {
	v, err := canonjson.Decode(raw)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("it is " + typeName(v))
	}
	return m, nil
}

type opError string

func (e opError) Error() string { return string(e) }

func applyOp(doc map[string]any, op Op) error {
	segs := strings.Split(op.Path, ".")
	parent, err := walk(doc, segs[:len(segs)-1], op.Op != OpUnset)
	if err != nil || parent == nil {
		return err // nil parent: $unset of a missing path
	}
	leaf := segs[len(segs)-1]
	cur, exists := parent[leaf]
	var val any
	if op.Op != OpUnset {
		if val, err = canonjson.Decode(op.Value); err != nil {
			return opError("value is not JSON")
		}
	}
	switch op.Op {
	case OpSet:
		parent[leaf] = val
	case OpUnset:
		delete(parent, leaf)
	case OpInc:
		if !exists {
			parent[leaf] = val
			return nil
		}
		n, ok := cur.(json.Number)
		if !ok {
			return opError("current value is " + typeName(cur) + ", not a number")
		}
		sum, err := addNumbers(n, val.(json.Number))
		if err != nil {
			return err
		}
		parent[leaf] = sum
	case OpMax, OpMin:
		if !exists {
			parent[leaf] = val
			return nil
		}
		c, err := compare(cur, val)
		if err != nil {
			return err
		}
		if (op.Op == OpMax && c < 0) || (op.Op == OpMin && c > 0) {
			parent[leaf] = val
		}
	case OpAddToSet:
		if !exists {
			parent[leaf] = []any{val}
			return nil
		}
		arr, ok := cur.([]any)
		if !ok {
			return opError("current value is " + typeName(cur) + ", not an array")
		}
		for _, e := range arr {
			if equalJSON(e, val) {
				return nil
			}
		}
		parent[leaf] = append(arr, val)
	}
	return nil
}

// walk descends through objects along segs. With create it makes missing
// objects; without it a missing segment returns (nil, nil).
func walk(doc map[string]any, segs []string, create bool) (map[string]any, error) {
	cur := doc
	for i, s := range segs {
		next, ok := cur[s]
		if !ok {
			if !create {
				return nil, nil
			}
			m := map[string]any{}
			cur[s] = m
			cur = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			if !create {
				return nil, nil
			}
			return nil, opError(strings.Join(segs[:i+1], ".") + " is " + typeName(next) + ", not an object")
		}
		cur = m
	}
	return cur, nil
}

// compare orders two numbers (by value) or two strings.
func compare(cur, val any) (int, error) {
	switch v := val.(type) {
	case json.Number:
		c, ok := cur.(json.Number)
		if !ok {
			return 0, opError("current value is " + typeName(cur) + ", value is a number")
		}
		return compareNumbers(c, v)
	case string:
		c, ok := cur.(string)
		if !ok {
			return 0, opError("current value is " + typeName(cur) + ", value is a string")
		}
		return strings.Compare(c, v), nil
	}
	return 0, opError("value must be a number or a string")
}

// equalJSON is deep equality of decoded values where numbers compare by
// value: $addToSet must not add 1.0 to [1], nor {"n":1e0} to [{"n":1}].
func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		return ok && equalNumbers(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			if yv, ok := y[k]; !ok || !equalJSON(xv, yv) {
				return false
			}
		}
		return true
	}
	return a == b // string, bool or nil
}

// depthOf is the nesting of v as the canonical parser counts it (a scalar
// is 0, {} and [] are 1), exact up to limit; past it, some value > limit.
func depthOf(v any, limit int) int {
	var kids iter.Seq[any]
	switch x := v.(type) {
	case []any:
		kids = slices.Values(x)
	case map[string]any:
		kids = maps.Values(x)
	default:
		return 0
	}
	if limit <= 0 {
		return 1 // a container where none fits
	}
	d := 0
	for c := range kids {
		if d = max(d, depthOf(c, limit-1)); d >= limit {
			break
		}
	}
	return d + 1
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "unknown"
}
