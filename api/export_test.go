package api

// ForwardAnswerBytesMax is forwardAnswerBytesMax, for the forwarding tests
// of package api_test.
const ForwardAnswerBytesMax = forwardAnswerBytesMax
