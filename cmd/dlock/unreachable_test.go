package main_test

import (
	"net"
	"strings"
	"testing"
	"time"
)

// A ZooKeeper that is down fails as fast as a Redis that is down: at once
// when its port refuses connections, and within --wait (or the 5s Redis
// gets to answer) when it accepts them but never answers.
func TestZooKeeperUnreachableFailsFast(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := closed.Addr().String()
	closed.Close()
	// A listener that never accepts: the kernel completes connections,
	// and nothing ever answers on them.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// Each limit is the time the case is given, and a second for the
	// process itself: --wait 1s bounds connecting too, and the wait for
	// zklock.New's reason comes out of it (it once took 2s).
	cases := []struct {
		name   string
		server string
		wait   string
		limit  time.Duration
	}{
		{"refused, --wait 0", refusing, "0", 2 * time.Second},
		{"refused, --wait 1m", refusing, "1m", 2 * time.Second},
		{"silent, --wait 1s", silent.Addr().String(), "1s", 2 * time.Second},
		{"silent, --wait 0", silent.Addr().String(), "0", 8 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := dlock(t, nil, "run", "--zk", tc.server, "--wait", tc.wait, "x", "--", "true")
			if r.code != 69 || !strings.Contains(r.stderr, "cannot reach the lock service") {
				t.Errorf("exit %d, %q; want 69, cannot reach", r.code, r.stderr)
			}
			if r.took > tc.limit {
				t.Errorf("took %v; want at most %v", r.took, tc.limit)
			}
			t.Logf("%s: exit %d after %v", tc.name, r.code, r.took.Round(time.Millisecond))
		})
	}
}
