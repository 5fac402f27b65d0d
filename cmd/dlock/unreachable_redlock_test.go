package main_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// Redlock masters that accept connections but never answer cost one
// answer timeout (5s) together, not one each.
func TestIntegrationRedlockSilentMastersFailTogether(t *testing.T) {
	t.Parallel()
	var silent []string
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: nothing answers
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		silent = append(silent, "redis://"+l.Addr().String())
	}
	good := testenv.StartRedis(t, testenv.RedisConfig{})
	for _, tc := range []struct {
		name string
		urls []string
	}{
		{"one answers", []string{"redis://" + good.Addr(), silent[0], silent[1]}},
		{"none answers", silent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"run", "--wait", "0"}
			for _, u := range tc.urls {
				args = append(args, "--redis", u)
			}
			r := dlock(t, nil, append(args, "x", "--", "true")...)
			if r.code != 69 || !strings.Contains(r.stderr, "Redlock needs a majority") {
				t.Errorf("exit %d, %q; want 69, no majority", r.code, r.stderr)
			}
			// One 5s answer timeout, and start-up on a loaded machine;
			// masters pinged in turn took 10s and 15s.
			if r.took > 8*time.Second {
				t.Errorf("took %v; want one answer timeout (5s), not one per master", r.took)
			}
			t.Logf("%s: exit %d after %v", tc.name, r.code, r.took.Round(time.Millisecond))
		})
	}
}
