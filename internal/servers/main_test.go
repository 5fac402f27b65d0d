package servers

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// Every test closes what it started (StopAll is for what a failed one
	// left behind).
	for _, d := range running.list("") {
		fmt.Fprintf(os.Stderr, "%s still registered after the tests\n", d.name())
		code = 1
	}
	if err := StopAll(); err != nil {
		fmt.Fprintln(os.Stderr, "StopAll:", err)
		code = 1
	}
	if leaked := leakedPIDs(); len(leaked) > 0 {
		fmt.Fprintf(os.Stderr, "server processes still running after the tests: %v\n", leaked)
		code = 1
	}
	os.Exit(code)
}

// leakedPIDs returns the PIDs started by this process that still belong to
// a live redis-server, postgres, mariadbd or etcd.
func leakedPIDs() []int {
	registry.Lock()
	pids := append([]int(nil), registry.pids...)
	registry.Unlock()
	var leaked []int
	for _, pid := range pids {
		if syscall.Kill(pid, 0) != nil {
			continue // ESRCH: gone
		}
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && (strings.Contains(string(cmdline), "redis") || strings.Contains(string(cmdline), "postgres") || strings.Contains(string(cmdline), "mariadbd") || strings.Contains(string(cmdline), "etcd")) {
			leaked = append(leaked, pid)
		}
	}
	return leaked
}
