package chaos

import (
	"os/exec"
	"testing"
)

// A client that exited only because of go-zookeeper's own known race is
// not a failure; any other race, or any other exit, is.
func TestOnlyKnownRaces(t *testing.T) {
	exit := func(code string) error { return exec.Command("sh", "-c", "exit "+code).Run() }
	known := "WARNING: DATA RACE\nWrite at 0x1 by goroutine 7:\n  github.com/go-zookeeper/zk.(*Conn).recvLoop()\n" +
		"Previous read at 0x1 by goroutine 8:\n  github.com/go-zookeeper/zk.(*Conn).sendSetWatches()\n" +
		"Goroutine 7 (running) created at:\n  github.com/dlock-go/dlock/zklock.(*Session).dial()\n=====\n"
	ours := "WARNING: DATA RACE\nWrite at 0x2 by goroutine 9:\n  github.com/dlock-go/dlock/zklock.(*Session).renew()\n" +
		"Previous read at 0x2 by goroutine 10:\n  github.com/go-zookeeper/zk.(*Conn).sendSetWatches()\n=====\n"
	for _, tc := range []struct {
		code, stderr string
		want         bool
	}{
		{"66", known, true},
		{"66", known + known, true},
		{"66", known + ours, false},
		{"66", "", false},
		{"1", known, false},
	} {
		p := &clientProc{err: exit(tc.code)}
		p.note(tc.stderr)
		if got := p.onlyKnownRaces(); got != tc.want {
			t.Errorf("exit %s with %q: onlyKnownRaces = %v, want %v", tc.code, tc.stderr, got, tc.want)
		}
	}
}
