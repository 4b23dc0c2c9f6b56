package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// space is JSON's insignificant whitespace.
const space = " \t\n\r"

// Blank reports whether raw holds no value at all: it is empty or only
// whitespace. Callers say "missing" for it rather than "malformed".
func Blank(raw []byte) bool { return len(bytes.TrimLeft(raw, space)) == 0 }

// Kind names the type of the JSON value raw starts with ("an object", "a
// number", "null", …; "" if it starts none), judged by its first byte only:
// it is for messages that say what was given instead of what was wanted,
// which must not depend on whether the rest parses.
func Kind(raw []byte) string {
	raw = bytes.TrimLeft(raw, space)
	if len(raw) == 0 {
		return ""
	}
	switch c := raw[0]; {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	}
	return ""
}

// Decode decodes one JSON value with encoding/json into map[string]any,
// []any, string, json.Number, bool or nil. Numbers stay json.Number, as
// written, so that no value is rounded through float64. It is less strict
// than Append: use it on canonical input, or input Append accepted.
func Decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

// Marshal encodes a value of the types Decode returns in canonical form:
// Marshal(Decode(x)) is Append(nil, x) for every x Append accepts (the
// differential test and fuzz target hold them to it), so what a transform
// stores is what an insert of the same document stores.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
