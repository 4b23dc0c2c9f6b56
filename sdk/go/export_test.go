package idem

import "net"

// Sentinels is the sentinel list, for the test that holds it to the
// server's codes.
func Sentinels() []*Error { return sentinels }

func netListen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
