package main_test

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testenv"
)

// dlock run on Redlock accepts a TTL longer than redlock's default restart
// window (30s): it widens its client's window to the TTL. New nodes then
// sit out that window, and the refusal says so: exit 69, since nobody
// holds the lock (75 would tell a fleet's cron job that another host ran
// it).
func TestIntegrationRedlockLongTTL(t *testing.T) {
	t.Parallel()
	// New servers: the shared ones have run for longer than the window.
	d := redisDeploymentOn(testenv.StartRedisN(t, 3, testenv.RedisConfig{}))
	r := dlock(t, nil, runArgs(d, "--ttl", "45s", "--wait", "0", lockName(t), "--", "true")...)
	if r.code != 69 || strings.Contains(r.stderr, "WithRestartWindow") || !strings.Contains(r.stderr, "vote") || !strings.Contains(r.stderr, "--wait") {
		t.Errorf("--ttl 45s on new Redlock nodes: exit %d, %q; want 69, the nodes not voting yet, and --wait named", r.code, r.stderr)
	}
}
