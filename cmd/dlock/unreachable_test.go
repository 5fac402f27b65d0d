package main_test

import (
	"net"
	"strings"
	"testing"
	"time"
)

// A ZooKeeper that is down fails as fast as a Redis that is down: without
// --wait, at once when its port refuses connections, and within the 5s
// Redis gets to answer when it accepts them but never answers; with
// --wait, when --wait ends (issue 32: before, at once when refused).
func TestZooKeeperUnreachableFailsFast(t *testing.T) {
	t.Parallel()
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
		{"refused, --wait 1s", refusing, "1s", 2 * time.Second},
		{"silent, --wait 1s", silent.Addr().String(), "1s", 2 * time.Second},
		{"silent, --wait 0", silent.Addr().String(), "0", 8 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The second for the process itself is what a dlock that
			// exits at once takes, when a loaded machine makes that longer.
			startup := dlock(t, nil, "version").took
			r := dlock(t, nil, "run", "--zk", tc.server, "--wait", tc.wait, "x", "--", "true")
			if r.code != 69 || !strings.Contains(r.stderr, "the lock service is unavailable: zookeeper "+tc.server+" since ") {
				t.Errorf("exit %d, %q; want 69, the service unavailable", r.code, r.stderr)
			}
			if limit := tc.limit + max(startup-time.Second, 0); r.took > limit {
				t.Errorf("took %v; want at most %v (a dlock that exits at once took %v)", r.took, limit, startup)
			}
			if wait, _ := time.ParseDuration(tc.wait); r.took < wait {
				t.Errorf("took %v; want all of --wait %v", r.took, wait)
			}
			t.Logf("%s: exit %d after %v", tc.name, r.code, r.took.Round(time.Millisecond))
		})
	}
}
