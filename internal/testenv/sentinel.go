package testenv

import (
	"fmt"
	"testing"
)

const sentinelConfName = "sentinel.conf"

// LaunchSentinel starts a Redis Sentinel on a free port that monitors master
// under the name masterName, with a quorum of one and a one-second
// down-after period. The caller must Close it.
func LaunchSentinel(master *Redis, masterName string) (*Redis, error) {
	if master == nil || masterName == "" {
		return nil, fmt.Errorf("testenv: LaunchSentinel needs a master and a name")
	}
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds %[1]s 1000\n"+
		"sentinel failover-timeout %[1]s 5000\n", masterName, master.Port())
	if master.password != "" {
		conf += fmt.Sprintf("sentinel auth-pass %s %s\n", masterName, master.password)
	}
	return LaunchRedis(RedisConfig{sentinel: conf})
}

// StartSentinel is LaunchSentinel for tests: it fails t on error and closes
// the Sentinel when t ends.
func StartSentinel(t testing.TB, master *Redis, masterName string) *Redis {
	t.Helper()
	SkipIfShort(t, "needs redis-sentinel")
	RequireBinary(t, "redis-server")
	s, err := LaunchSentinel(master, masterName)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { closeForTest(t, "redis-server", s) })
	return s
}
