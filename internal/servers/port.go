package servers

import (
	"errors"
	"fmt"
	"net"
	"sync"
)

// ports records every port handed out by FreePort or claimed by a server
// started with an explicit port, so that two servers in one process never
// share one.
var ports struct {
	sync.Mutex
	used map[int]bool
}

// reservePort marks port as handed out. It reports whether the port was
// free in the process-wide set.
func reservePort(port int) bool {
	ports.Lock()
	defer ports.Unlock()
	if ports.used == nil {
		ports.used = make(map[int]bool)
	}
	if ports.used[port] {
		return false
	}
	ports.used[port] = true
	return true
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// It never returns the same port twice within one process, so concurrent
// callers receive distinct ports. Another process may still take the port
// before the caller binds it; LaunchRedis retries with a new port when
// that happens.
func FreePort() (int, error) {
	const attempts = 100
	for range attempts {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("servers: no free port on 127.0.0.1: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return 0, fmt.Errorf("servers: closing probe listener: %w", err)
		}
		if reservePort(port) {
			return port, nil
		}
	}
	return 0, errors.New("servers: no unused free port on 127.0.0.1 after 100 attempts")
}
