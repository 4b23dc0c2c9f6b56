package main

import (
	"fmt"
	"syscall"
)

// The connection caps' defaults come from the open-files limit: every
// connection holds a descriptor, and the store must always find the ones
// it needs to roll a log segment or write a checkpoint.
const (
	// descriptorReserveMin is the descriptors kept from connections at
	// least: the store's files (log segments and their spare, checkpoint
	// parts, value-log segments, the directory), the etcd client's and the
	// forwarding client's connections, and the brief one a refusal at the
	// cap holds.
	descriptorReserveMin = 128
	// descriptorReserveDivisor: a larger limit keeps an eighth of it back.
	descriptorReserveDivisor = 8
	// connectionsDefaultMax bounds the default cap however high the limit
	// (containers often allow 1M): a connection holds a goroutine and
	// buffers, some 60 KB measured under a flood, so 4096 of them stay
	// within a few hundred MB.
	connectionsDefaultMax = 4096
	// idleConnectionsDivisor: by default a quarter of the cap may sit idle
	// in keep-alive, leaving the rest to connections at work.
	idleConnectionsDivisor = 4
)

// openFilesLimit is the process's RLIMIT_NOFILE soft limit (the Go runtime
// raised it to the hard limit at start).
func openFilesLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	return l.Cur, nil
}

// connectionCaps resolves -max-connections and -max-idle-connections (0:
// the default) against the open-files limit. An explicit cap that leaves
// the store less than descriptorReserveMin is refused: it is the fail-stop
// the cap exists to prevent.
func connectionCaps(maxConns, maxIdle int, limit uint64) (int, int, error) {
	reserve := max(uint64(descriptorReserveMin), limit/descriptorReserveDivisor)
	if limit <= reserve {
		return 0, 0, fmt.Errorf("the open-files limit is %d, within the %d descriptors the store keeps; raise it (ulimit -n)", limit, reserve)
	}
	room := limit - reserve
	switch {
	case maxConns == 0:
		maxConns = int(min(room, connectionsDefaultMax))
	case uint64(maxConns) > limit-descriptorReserveMin:
		return 0, 0, usagef("-max-connections %d: the open-files limit is %d, and the store keeps %d of them; at most %d",
			maxConns, limit, descriptorReserveMin, limit-descriptorReserveMin)
	}
	if maxIdle == 0 {
		maxIdle = max(1, maxConns/idleConnectionsDivisor)
	}
	if maxIdle > maxConns {
		return 0, 0, usagef("-max-idle-connections %d: must be at most -max-connections %d", maxIdle, maxConns)
	}
	return maxConns, maxIdle, nil
}
