package api

// ForwardAnswerBytesMax is forwardAnswerBytesMax, for the forwarding tests
// of package api_test.
const ForwardAnswerBytesMax = forwardAnswerBytesMax

// TokenBytesMin is tokenBytesMin, for the tokens-file tests of package
// api_test.
const TokenBytesMin = tokenBytesMin

// SessionShardOf is sessionShardOf, for the sharded-routing tests of package
// api_test.
var SessionShardOf = sessionShardOf
