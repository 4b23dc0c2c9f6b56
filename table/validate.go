package table

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/internal/canonjson"
)

// validate checks everything about the batch that does not depend on stored
// data and returns the first refusal, in a fixed order (batch, then inserts,
// deletes and transforms, each in order): the refusal is the API's answer,
// and a retry of the same batch must get the same one.
func (b *Batch) validate(f *forms) *code.Error {
	n := b.docCount()
	switch {
	case n == 0:
		return invalid("batch is empty: give inserts, deletes or transforms")
	case n > BatchDocsMax:
		return invalid("batch touches %d documents (max %d)", n, BatchDocsMax)
	case b.numErr != nil:
		return invalid("batch body: %v", b.numErr)
	}
	ids := make(idSet, n)
	for i, in := range b.Inserts {
		if err := validateInsert(f, ids, i, in); err != nil {
			return err
		}
	}
	for i, id := range b.Deletes {
		if err := ids.use(id, place{list: "deletes", i: i, op: -1}); err != nil {
			return err
		}
	}
	k := 0 // the op's index in the batch, for forms
	for i, tr := range b.Transforms {
		where := place{list: "transforms", i: i, op: -1}
		if err := ids.use(tr.ID, where); err != nil {
			return err
		}
		if len(tr.Ops) == 0 || len(tr.Ops) > transformOpsMax {
			return invalid("%s: %d ops (1..%d)", where, len(tr.Ops), transformOpsMax)
		}
		for j, op := range tr.Ops {
			if err := op.validate(f, k, place{list: "transforms", i: i, op: j}); err != nil {
				return err
			}
			k++
		}
	}
	return nil
}

// idSet is the documents a batch touches so far, and where: one batch
// touches each document at most once, so that its outcome does not depend
// on the order of its parts.
type idSet map[string]place

func (s idSet) use(id string, where place) *code.Error {
	if !validDocID(id) {
		return invalid("%s: invalid document id %q (1..%d of A-Z a-z 0-9 _ . : @ ~ -, not \".\" or \"..\")", where, id, docIDBytesMax)
	}
	if prev, dup := s[id]; dup {
		return invalid("%s: document %q is also touched by %s", where, id, prev)
	}
	s[id] = where
	return nil
}

func validateInsert(f *forms, ids idSet, i int, in Insert) *code.Error {
	where := place{list: "inserts", i: i, op: -1}
	if err := ids.use(in.ID, where); err != nil {
		return err
	}
	if len(in.Doc) > docBytesMax {
		return invalid("%s: document of %d bytes (max %d)", where, len(in.Doc), docBytesMax)
	}
	if err := checkDoc(f, i); err != nil {
		return invalid("%s: doc %v", where, err)
	}
	return nil
}

// checkDoc says why insert i's document is not one; its error completes
// "doc …". What was sent instead is named from its first byte, before any
// parse, so that the message does not depend on the rest.
func checkDoc(f *forms, i int) error {
	doc := f.b.Inserts[i].Doc
	switch k := canonjson.Kind(doc); {
	case canonjson.Blank(doc):
		return errors.New("must be a JSON object and is missing")
	case k != "an object" && k != "":
		return errors.New("must be a JSON object, not " + k)
	}
	if _, err := f.doc(i); err != nil {
		return fmt.Errorf("is not acceptable JSON: %w", err)
	}
	return nil
}

// validate checks an op without looking at any document; k is its index in
// the batch (for forms).
func (op Op) validate(f *forms, k int, where place) *code.Error {
	if err := validatePath(op.Path); err != nil {
		return invalid("%s: %s", where, err.Message)
	}
	switch op.Op {
	case OpSet, OpUnset, OpInc, OpMax, OpMin, OpAddToSet:
	default:
		return invalid("%s: unknown op %q (one of $set $unset $inc $max $min $addToSet)", where, op.Op)
	}
	has := len(op.Value) > 0
	switch {
	case op.Op == OpUnset && has:
		return invalid("%s: %s takes no value", where, op.Op)
	case op.Op == OpUnset:
		return nil
	case !has:
		return invalid("%s: %s", where, op.needs())
	}
	v, err := f.value(k, op.Value)
	if err != nil {
		return invalid("%s: value is not acceptable JSON: %v", where, err)
	}
	// The canonical form starts with the value's own first byte: enough to
	// tell its type.
	number := v[0] == '-' || (v[0] >= '0' && v[0] <= '9')
	switch {
	case op.Op == OpInc && !number:
		return invalid("%s: %s", where, op.needs())
	case (op.Op == OpMax || op.Op == OpMin) && !number && v[0] != '"':
		return invalid("%s: %s", where, op.needs())
	}
	return nil
}

// needs says what value op takes, for the refusal of a missing or wrong one.
func (op Op) needs() string {
	switch op.Op {
	case OpInc:
		return op.Op + " needs a number value"
	case OpMax, OpMin:
		return op.Op + " needs a number or string value"
	}
	return op.Op + " needs a value"
}

func validatePath(p string) *code.Error {
	if p == "" || len(p) > pathBytesMax {
		return invalid("path must be 1..%d bytes", pathBytesMax)
	}
	if !utf8.ValidString(p) {
		return invalid("path %q is not valid UTF-8", p)
	}
	segs := strings.Split(p, ".")
	if len(segs) > pathDepthMax {
		return invalid("path %q is deeper than %d", p, pathDepthMax)
	}
	for _, s := range segs {
		if s == "" {
			return invalid("path %q has an empty segment", p)
		}
	}
	return nil
}
