package canonjson

import (
	"errors"
	"strings"
	"testing"
)

// newDecoder returns a Decoder reading data. (The library holds its
// Decoders by value and Resets them: only the tests want a fresh one.)
func newDecoder(data []byte) *Decoder {
	d := new(Decoder)
	d.Reset(data)
	return d
}

// pair is the shape the Decoder tests read: {"name":string,"ok":bool,
// "v":any,"list":[{"name":string}]}.
type pair struct {
	d     *Decoder
	name  string
	ok    bool
	v     []byte
	names []string
}

func (p *pair) member(key string) (err error) {
	switch key {
	case "name":
		p.name, err = p.d.ReadString()
	case "ok":
		p.ok, err = p.d.ReadBool()
	case "v":
		p.v, err = p.d.ReadValue()
	case "list":
		err = p.d.Array(func() error { return p.d.Object(p.listMember) })
	default:
		err = errors.New("unknown " + key)
	}
	return err
}

func (p *pair) listMember(key string) error {
	if key != "name" {
		return errors.New("unknown " + key)
	}
	s, err := p.d.ReadString()
	p.names = append(p.names, s)
	return err
}

func decodePair(body string) (*pair, error) {
	p := &pair{d: newDecoder([]byte(body))}
	if err := p.d.Object(p.member); err != nil {
		return p, err
	}
	return p, p.d.End()
}

func TestDecoder_ReadsTheShape(t *testing.T) {
	p, err := decodePair(` { "v" : {"b":[1, 2.50],"a":"\u00e9"} , "name":"x\ny", "ok":true, "list":[{"name":"a"},{"name":"b"}] } `)
	if err != nil {
		t.Fatal(err)
	}
	if p.name != "x\ny" || !p.ok || string(p.v) != `{"a":"é","b":[1,2.50]}` || strings.Join(p.names, ",") != "a,b" {
		t.Fatalf("%+v", p)
	}
	if p.d.LimitErr() != nil {
		t.Fatal(p.d.LimitErr())
	}
	// null is an empty array; a value null stays "null".
	if p, err = decodePair(`{"list":null,"v":null}`); err != nil || p.names != nil || string(p.v) != "null" {
		t.Fatalf("%+v %v", p, err)
	}
}

// TestDecoder_Refuses: every refusal, with the message API answers carry.
func TestDecoder_Refuses(t *testing.T) {
	deep := strings.Repeat("[", DepthMax) + strings.Repeat("]", DepthMax)
	for _, c := range []struct{ body, want string }{
		{`{"name":"a","name":"b"}`, `duplicate field "name"`},
		{`{"Name":"a"}`, "unknown Name"}, // names match exactly
		{`[]`, "expected an object at offset 0"},
		{`{"name":1}`, "expected a string at offset 8"},
		{`{"ok":1}`, "expected true or false at offset 6"},
		{`{"list":{}}`, "expected an array at offset 8"},
		{`{"list":[1]}`, "expected an object at offset 9"},
		{`{"list":[{"name":"a"} {"name":"b"}]}`, "expected , or ] in array at offset 22"},
		{`{"list":[{"name":"a"}`, "unterminated array at offset 21"},
		{`{"ok":true "name":"a"}`, "expected , or } in object at offset 11"},
		{`{"ok":true`, "unterminated object at offset 10"},
		{`{"ok" true}`, "expected : after object key at offset 6"},
		{`{ok:true}`, "expected a string key at offset 1"},
		{`{"ok":true} {}`, "trailing data after the JSON object at offset 12"},
		{`{"v":` + deep + `}`, ""}, // the value's depth is its own
		{`{"v":[` + deep + `]}`, errDepth.Error()},
		{`{"v":{"a":1,"a":2}}`, `duplicate object key "a" at offset 18`},
		{`{"name":"\ud800"}`, `lone UTF-16 surrogate escape \ud800 (only a high-low pair encodes a character) at offset 9`},
		{"{\"name\":\"\xff\"}", "invalid UTF-8 byte 0xff in string at offset 9"},
	} {
		_, err := decodePair(c.body)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.body, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("%s: %v, want %s", c.body, err, c.want)
		}
	}
}

// TestDecoder_LimitErrDoesNotStop: a number beyond the limits is recorded
// (the first one, with its offset), not refused: the caller decides.
func TestDecoder_LimitErrDoesNotStop(t *testing.T) {
	p, err := decodePair(`{"v":[1e1001,1` + strings.Repeat("0", NumberDigitsMax) + `]}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.d.LimitErr(); got == nil || got.Error() != "number exponent is beyond ±1000 at offset 6" {
		t.Fatalf("LimitErr %v", got)
	}
	if _, err := Append(nil, []byte(`[1e1001, x]`)); err == nil || !strings.HasPrefix(err.Error(), "invalid character") {
		t.Fatalf("a syntax error must win over a limit: %v", err)
	}
}
