package etcdtest

import (
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
)

// The ports this process has handed out. A stopped member's ports are free
// as far as the kernel knows, but its Restart needs them back, so another
// cluster in this process must not take them.
var ports struct {
	sync.Mutex
	used map[int]bool
}

// freePort returns a loopback port that was free a moment ago. Another
// process may bind it before the caller does; Start retries on that.
func freePort() (int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.used == nil {
		ports.used = make(map[int]bool)
	}
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !ports.used[p] {
			ports.used[p] = true
			return p, nil
		}
	}
	return 0, errors.New("etcdtest: no free port")
}

func isAddrInUse(err error) bool {
	return err != nil && (errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use"))
}
