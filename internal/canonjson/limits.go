package canonjson

// The limits every input is held to. table re-exports them as DocDepthMax,
// NumberDigitsMax and NumberExponentMax: they are part of the API contract,
// and stored requests were accepted under exactly these values.
const (
	// DepthMax bounds nesting: {} and [] are one level each, counted from
	// the value being parsed (Append's input, or each Decoder.ReadValue).
	DepthMax = 64
	// NumberDigitsMax bounds the digits of a number literal before its
	// exponent (leading zeros included), NumberExponentMax the exponent as
	// written. They keep exact decimal arithmetic on stored numbers cheap.
	NumberDigitsMax   = 100
	NumberExponentMax = 1000
)
