package etcdtest

// MemberBinaryForTests is what the external tests' TestMain chose for
// Options.MemberBinary (main_test.go), so that this package's own tests
// run their members the same way.
var MemberBinaryForTests string
