package lease

// IsFence is isFence, for the fencing tests of package lease_test.
var IsFence = isFence
