package table_test

import (
	"strings"

	"github.com/idemdb/idem/code"
)

var (
	nines100 = strings.Repeat("9", 100) // the most digits a number may have
	big30    = "123456789012345678901234567890"
)

func inc(value string) string {
	return `[{"op":"$inc","path":"n","value":` + value + `}]`
}

// numberCases: $inc is exact arithmetic on numbers as written. The sum of
// two integers is an integer; any other sum is its shortest exact decimal
// text, plain while that fits numberDigitsMax digits, else d.ddde±x; a sum
// that fits neither is refused, naming the limit.
var numberCases = []transformCase{
	{name: "inc/big-int-is-exact", before: `{"n":` + big30 + `}`, ops: inc("1"), want: `{"n":123456789012345678901234567891}`},
	{name: "inc/big-ints-cancel-to-zero", before: `{"n":-` + big30 + `}`, ops: inc(big30), want: `{"n":0}`},
	{name: "inc/negative-zero-is-zero", before: `{"n":-0}`, ops: inc("0"), want: `{"n":0}`},
	{name: "inc/decimal-0.1+0.2-is-0.3", before: `{"n":0.1}`, ops: inc("0.2"), want: `{"n":0.3}`},
	{name: "inc/decimal-drops-trailing-zeros", before: `{"n":0.10}`, ops: inc("0.20"), want: `{"n":0.3}`},
	{name: "inc/decimal-1.5+1.5-is-3", before: `{"n":1.5}`, ops: inc("1.5"), want: `{"n":3}`},
	{name: "inc/int+decimal-1+1.0-is-2", before: `{"n":1}`, ops: inc("1.0"), want: `{"n":2}`},
	{name: "inc/int+exponent-1+1e0-is-2", before: `{"n":1}`, ops: inc("1e0"), want: `{"n":2}`},
	{name: "inc/upper-exponent", before: `{"n":2E2}`, ops: inc("1"), want: `{"n":201}`},
	{name: "inc/big-int+decimal", before: `{"n":` + big30 + `}`, ops: inc("0.5"), want: `{"n":123456789012345678901234567890.5}`},
	{name: "inc/decimal-goes-negative", before: `{"n":0.1}`, ops: inc("-0.3"), want: `{"n":-0.2}`},
	{name: "inc/decimal-cancels-to-zero", before: `{"n":0.5}`, ops: inc("-0.5"), want: `{"n":0}`},
	{name: "inc/small-decimal-is-plain", before: `{"n":0.001}`, ops: inc("0.002"), want: `{"n":0.003}`},
	{name: "inc/100-digit-plain-result", before: `{"n":1e99}`, ops: inc("1e99"), want: `{"n":2` + strings.Repeat("0", 99) + `}`},
	{name: "inc/101-digit-plain-becomes-exponent", before: `{"n":1e100}`, ops: inc("1e100"), want: `{"n":2e100}`},
	{name: "inc/tiny-exponent", before: `{"n":1.5e-200}`, ops: inc("1.5e-200"), want: `{"n":3e-200}`},
	{name: "inc/100-digit-fraction-stays-plain", before: `{"n":1e-99}`, ops: inc("0.0"), want: `{"n":0.` + strings.Repeat("0", 98) + `1}`},
	{name: "inc/101-digit-fraction-becomes-exponent", before: `{"n":1e-100}`, ops: inc("0.0"), want: `{"n":1e-100}`},
	{name: "inc/many-significant-digits-exponent", before: `{"n":1.25e200}`, ops: inc("1e198"), want: `{"n":1.26e200}`},
	{name: "inc/100-digit-int-minus-one", before: `{"n":` + nines100 + `}`, ops: inc("-1"), want: `{"n":` + strings.Repeat("9", 99) + `8}`},
	{name: "inc/missing-path-keeps-value-as-written", before: `{}`, ops: inc("1.0"), want: `{"n":1.0}`},
	{name: "inc/101-digit-int-result-is-refused", before: `{"n":` + nines100 + `}`, ops: inc("1"), code: code.InvalidRequest, failOp: "ops[0] $inc", msg: "result has 101 digits (max 100)"},
	{name: "inc/too-many-significant-digits-is-refused", before: `{"n":1e1000}`, ops: inc("1e-1000"), code: code.InvalidRequest, failOp: "ops[0] $inc", msg: "result needs 2001 significant digits (max 100)"},
	{name: "inc/exponent-past-limit-is-refused", before: `{"n":9e1000}`, ops: inc("9e1000"), code: code.InvalidRequest, failOp: "ops[0] $inc", msg: "result needs an exponent beyond ±1000"},
}

// byValueCases: $max, $min and $addToSet compare numbers by value, at any
// depth: 1, 1.0 and 1e0 are one number, whatever text is stored.
var byValueCases = []transformCase{
	{name: "max/1.0-equals-1-keeps-current", before: `{"n":1}`, ops: `[{"op":"$max","path":"n","value":1.0}]`, want: `{"n":1}`},
	{name: "min/1e0-equals-1-keeps-current", before: `{"n":1}`, ops: `[{"op":"$min","path":"n","value":1e0}]`, want: `{"n":1}`},
	{name: "max/1-equals-1.0-keeps-current", before: `{"n":1.0}`, ops: `[{"op":"$max","path":"n","value":1}]`, want: `{"n":1.0}`},
	{name: "max/1e2-equals-100", before: `{"n":100}`, ops: `[{"op":"$max","path":"n","value":1e2},{"op":"$min","path":"n","value":100.00}]`, want: `{"n":100}`},
	{name: "max/1.01e2-beats-100", before: `{"n":100}`, ops: `[{"op":"$max","path":"n","value":1.01e2}]`, want: `{"n":1.01e2}`},
	{name: "max/big-int-larger-replaces", before: `{"n":` + big30 + `}`, ops: `[{"op":"$max","path":"n","value":123456789012345678901234567891}]`, want: `{"n":123456789012345678901234567891}`},
	{name: "max/big-int-beats-smaller-decimal", before: `{"n":` + big30 + `}`, ops: `[{"op":"$max","path":"n","value":123456789012345678901234567889.99}]`, want: `{"n":` + big30 + `}`},
	{name: "min/big-decimal-smaller-replaces", before: `{"n":` + big30 + `}`, ops: `[{"op":"$min","path":"n","value":123456789012345678901234567889.99}]`, want: `{"n":123456789012345678901234567889.99}`},
	{name: "max/beyond-float-precision-replaces", before: `{"n":0.3}`, ops: `[{"op":"$max","path":"n","value":0.30000000000000001}]`, want: `{"n":0.30000000000000001}`},
	{name: "min/beyond-float-precision-replaces", before: `{"n":0.30000000000000001}`, ops: `[{"op":"$min","path":"n","value":0.3}]`, want: `{"n":0.3}`},
	{name: "max/past-2^53-replaces", before: `{"n":9007199254740992}`, ops: `[{"op":"$max","path":"n","value":9007199254740993.0}]`, want: `{"n":9007199254740993.0}`},
	{name: "min/huge-negative-exponent", before: `{"n":-1e500}`, ops: `[{"op":"$min","path":"n","value":-1e501}]`, want: `{"n":-1e501}`},
	{name: "max/tiny-positive-beats-zero", before: `{"n":0}`, ops: `[{"op":"$max","path":"n","value":1e-1000}]`, want: `{"n":1e-1000}`},

	{name: "addToSet/1.0-and-1e0-equal-1", before: `{"t":[1]}`, ops: `[{"op":"$addToSet","path":"t","value":1.0},{"op":"$addToSet","path":"t","value":1e0}]`, want: `{"t":[1]}`},
	{name: "addToSet/1-equals-stored-1.0", before: `{"t":[1.0]}`, ops: `[{"op":"$addToSet","path":"t","value":1}]`, want: `{"t":[1.0]}`},
	{name: "addToSet/zero-signs-equal", before: `{"t":[0]}`, ops: `[{"op":"$addToSet","path":"t","value":-0.0}]`, want: `{"t":[0]}`},
	{name: "addToSet/2.0-is-new", before: `{"t":[1]}`, ops: `[{"op":"$addToSet","path":"t","value":2.0}]`, want: `{"t":[1,2.0]}`},
	{name: "addToSet/nested-numbers-by-value", before: `{"t":[{"a":[1,{"b":100}]}]}`, ops: `[{"op":"$addToSet","path":"t","value":{"a":[1.0,{"b":1e2}]}}]`, want: `{"t":[{"a":[1,{"b":100}]}]}`},
	{name: "addToSet/array-order-matters", before: `{"t":[[1,2]]}`, ops: `[{"op":"$addToSet","path":"t","value":[2e0,1.0]}]`, want: `{"t":[[1,2],[2e0,1.0]]}`},
	{name: "addToSet/extra-member-is-new", before: `{"t":[{"a":1}]}`, ops: `[{"op":"$addToSet","path":"t","value":{"a":1,"b":1}}]`, want: `{"t":[{"a":1},{"a":1,"b":1}]}`},
	{name: "addToSet/scalars-by-type", before: `{"t":[null,true,"1",1]}`, ops: `[{"op":"$addToSet","path":"t","value":null},{"op":"$addToSet","path":"t","value":"1"},{"op":"$addToSet","path":"t","value":false}]`, want: `{"t":[null,true,"1",1,false]}`},
}
