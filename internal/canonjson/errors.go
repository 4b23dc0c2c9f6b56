package canonjson

import "fmt"

// syntaxError is input this package refuses: malformed JSON, or JSON it is
// stricter about than RFC 8259 requires (see the package documentation).
// Its message is part of API answers, so its text must not change.
type syntaxError struct {
	Offset int    // byte offset in the input where the problem was found
	Msg    string // what is wrong, without the offset
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%s at offset %d", e.Msg, e.Offset) }

// errDepth is input nested deeper than DepthMax. It carries no offset: the
// depth, not a position, is what the sender must change.
var errDepth = fmt.Errorf("nesting deeper than %d levels (the limit for any document or value)", DepthMax)

// duplicateField is a Decoder object naming a member twice. Unlike a
// duplicate key inside a value it has no offset, as it always had.
func duplicateField(key string) error { return fmt.Errorf("duplicate field %q", key) }
