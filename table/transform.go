package table

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/idemdb/idem/code"
)

// The transform ops.
const (
	OpSet      = "$set"      // set path to value, creating intermediate objects
	OpUnset    = "$unset"    // remove path; a missing path is a no-op
	OpInc      = "$inc"      // add a number; a missing path starts at 0
	OpMax      = "$max"      // keep the larger of current and value (numbers or strings)
	OpMin      = "$min"      // keep the smaller
	OpAddToSet = "$addToSet" // append value to an array unless an equal element exists
)

// appendCanonical validates an op without looking at any document and
// appends its canonical form {"op":…,"path":…[,"value":…]}.
func (op Op) appendCanonical(dst []byte, where place, canonicalInput bool) ([]byte, *code.Error) {
	if err := validatePath(op.Path); err != nil {
		return nil, invalid("%s: %s", where, err.Message)
	}
	switch op.Op {
	case OpSet, OpUnset, OpInc, OpMax, OpMin, OpAddToSet:
	default:
		return nil, invalid("%s: unknown op %q (one of $set $unset $inc $max $min $addToSet)", where, op.Op)
	}
	dst = append(dst, `{"op":`...)
	dst = appendJSONString(dst, []byte(op.Op))
	dst = append(dst, `,"path":`...)
	dst = appendJSONString(dst, []byte(op.Path))
	has := len(op.Value) > 0
	if op.Op == OpUnset {
		if has {
			return nil, invalid("%s: %s takes no value", where, op.Op)
		}
		return append(dst, '}'), nil
	}
	if !has {
		switch op.Op {
		case OpInc:
			return nil, invalid("%s: %s needs a number value", where, op.Op)
		case OpMax, OpMin:
			return nil, invalid("%s: %s needs a number or string value", where, op.Op)
		}
		return nil, invalid("%s: %s needs a value", where, op.Op)
	}
	dst = append(dst, `,"value":`...)
	start := len(dst)
	if canonicalInput {
		dst = append(dst, op.Value...)
	} else {
		var err error
		if dst, err = appendCanonical(dst, op.Value); err != nil {
			return nil, invalid("%s: value is not JSON (%v)", where, err)
		}
	}
	first := dst[start]
	number := first == '-' || (first >= '0' && first <= '9')
	switch {
	case op.Op == OpInc && !number:
		return nil, invalid("%s: %s needs a number value", where, op.Op)
	case (op.Op == OpMax || op.Op == OpMin) && !number && first != '"':
		return nil, invalid("%s: %s needs a number or string value", where, op.Op)
	}
	return append(dst, '}'), nil
}

func validatePath(p string) *code.Error {
	if p == "" || len(p) > PathBytesMax {
		return invalid("path must be 1..%d bytes", PathBytesMax)
	}
	segs := strings.Split(p, ".")
	if len(segs) > PathDepthMax {
		return invalid("path %q is deeper than %d", p, PathDepthMax)
	}
	for _, s := range segs {
		if s == "" {
			return invalid("path %q has an empty segment", p)
		}
	}
	return nil
}

// applyTransform applies ops in order to doc (which it mutates). A type
// mismatch, such as $inc on a string, is a *code.Error invalid_request naming
// the op; the caller then writes nothing.
func applyTransform(doc map[string]any, id string, ops []Op) *code.Error {
	for i, op := range ops {
		if err := applyOp(doc, op); err != nil {
			return invalid("transform of %q, ops[%d] %s %q: %s", id, i, op.Op, op.Path, err)
		}
	}
	return nil
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
		if val, err = decodeValue(op.Value); err != nil {
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
		enc, _ := marshalValue(val)
		for _, e := range arr {
			if ee, _ := marshalValue(e); bytes.Equal(ee, enc) {
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

func isInteger(n json.Number) bool { return !strings.ContainsAny(string(n), ".eE") }

func addNumbers(a, b json.Number) (json.Number, error) {
	if isInteger(a) && isInteger(b) {
		x, errx := strconv.ParseInt(string(a), 10, 64)
		y, erry := strconv.ParseInt(string(b), 10, 64)
		if errx == nil && erry == nil {
			s := x + y
			if (y > 0 && s < x) || (y < 0 && s > x) {
				return "", opError("integer overflow")
			}
			return json.Number(strconv.FormatInt(s, 10)), nil
		}
	}
	x, errx := a.Float64()
	y, erry := b.Float64()
	if errx != nil || erry != nil {
		return "", opError("number out of range")
	}
	s := x + y
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return "", opError("number out of range")
	}
	return json.Number(strconv.FormatFloat(s, 'g', -1, 64)), nil
}

// compare orders two numbers or two strings.
func compare(cur, val any) (int, error) {
	switch v := val.(type) {
	case json.Number:
		c, ok := cur.(json.Number)
		if !ok {
			return 0, opError("current value is " + typeName(cur) + ", value is a number")
		}
		if isInteger(c) && isInteger(v) {
			x, errx := strconv.ParseInt(string(c), 10, 64)
			y, erry := strconv.ParseInt(string(v), 10, 64)
			if errx == nil && erry == nil {
				return cmpOrdered(x, y), nil
			}
		}
		x, _ := c.Float64()
		y, _ := v.Float64()
		return cmpOrdered(x, y), nil
	case string:
		c, ok := cur.(string)
		if !ok {
			return 0, opError("current value is " + typeName(cur) + ", value is a string")
		}
		return strings.Compare(c, v), nil
	}
	return 0, opError("value must be a number or a string")
}

func cmpOrdered[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
