package servers

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Ports handed out by FreePort come from a range below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range), so that no outgoing
// connection and no listener on port 0 ever takes one, and each is claimed
// for the life of the process by an flock on a file under
// $TMPDIR/dlock-test-ports, so that no other test process takes it either.
// A server a test stops to make an outage therefore finds its port free
// when it restarts.
const (
	lowestPort  = 10000
	highestPort = 32767 // below Linux's default ephemeral range, 32768–60999
)

// ports records every port handed out by FreePort or claimed by a server
// started with an explicit port, with the lock file that claims it across
// processes (nil for an explicit port).
var ports struct {
	sync.Mutex
	used map[int]*os.File
}

// reservePort marks port as handed out. It reports whether the port was
// free in the process-wide set.
func reservePort(port int) bool {
	return claimPort(port, nil)
}

func claimPort(port int, lock *os.File) bool {
	ports.Lock()
	defer ports.Unlock()
	if ports.used == nil {
		ports.used = make(map[int]*os.File)
	}
	if _, ok := ports.used[port]; ok {
		return false
	}
	ports.used[port] = lock
	return true
}

// FreePort returns a TCP port on 127.0.0.1 that is free and stays claimed
// by this process until it exits: no other caller of FreePort, in this
// process or another, receives it, and the kernel never hands it out as an
// ephemeral port. A program that does not use FreePort may still bind it;
// LaunchRedis and the other launchers retry with a new port when that
// happens.
func FreePort() (int, error) {
	dir := filepath.Join(os.TempDir(), "dlock-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, fmt.Errorf("servers: port lock directory: %w", err)
	}
	_ = os.Chmod(dir, 0o777|os.ModeSticky) // shared by every user's test runs
	lo, hi := portRange()
	const attempts = 200
	for range attempts {
		port := lo + rand.IntN(hi-lo+1)
		lock, ok := lockPortFile(dir, port)
		if !ok {
			continue
		}
		if !portFree(port) || !claimPort(port, lock) {
			lock.Close() // releases the flock
			continue
		}
		return port, nil
	}
	return 0, fmt.Errorf("servers: no free port on 127.0.0.1 in %d-%d after %d attempts", lo, hi, attempts)
}

// portRange returns the range FreePort draws from: lowestPort up to the
// port below the kernel's ephemeral range, or highestPort where that range
// cannot be read.
func portRange() (lo, hi int) {
	lo, hi = lowestPort, highestPort
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return lo, hi
	}
	if first, err := strconv.Atoi(f[0]); err == nil && first-1 < hi && first-1 > lo+1000 {
		hi = first - 1
	}
	return lo, hi
}

// lockPortFile takes an exclusive, non-blocking flock on dir/port. The lock
// lasts until the file is closed or the process exits.
func lockPortFile(dir string, port int) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDONLY, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// portFree reports whether a listener can bind 127.0.0.1:port now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	return l.Close() == nil
}
