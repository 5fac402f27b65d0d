package servers

import (
	"fmt"
	"net"
	"strconv"
	"time"
)

const sentinelConfName = "sentinel.conf"

// SentinelConfig describes a Redis Sentinel to start with
// LaunchSentinelConfig.
type SentinelConfig struct {
	// MasterName is the name under which the Sentinel monitors the master.
	MasterName string
	// MasterAddr is the master's host:port as the Sentinel reaches it
	// (the master itself, or a proxy in front of it).
	MasterAddr string
	// Password is the master's password, if it has one.
	Password string
	// SentinelPassword, if set, is the Sentinel's own password
	// (requirepass): its clients must authenticate with it.
	SentinelPassword string
	// Quorum is how many Sentinels must agree that the master is down;
	// the default is 1.
	Quorum int
	// DownAfter is how long the master must not answer before this
	// Sentinel considers it down; the default is one second.
	DownAfter time.Duration
	// FailoverTimeout is Sentinel's failover-timeout; the default is five
	// seconds.
	FailoverTimeout time.Duration
}

// LaunchSentinel starts a Redis Sentinel on a free port that monitors master
// under the name masterName, with a quorum of one and a one-second
// down-after period. The caller must Close it.
func LaunchSentinel(master *Redis, masterName string) (*Redis, error) {
	if master == nil {
		return nil, fmt.Errorf("servers: LaunchSentinel needs a master and a name")
	}
	return LaunchSentinelConfig(SentinelConfig{MasterName: masterName, MasterAddr: master.Addr(), Password: master.password})
}

// LaunchSentinelConfig starts a Redis Sentinel described by cfg on a free
// port. The caller must Close it.
func LaunchSentinelConfig(cfg SentinelConfig) (*Redis, error) {
	host, port, err := net.SplitHostPort(cfg.MasterAddr)
	if err != nil || cfg.MasterName == "" {
		return nil, fmt.Errorf("servers: a Sentinel needs a master name and a master host:port, not %q", cfg.MasterAddr)
	}
	if _, err := strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("servers: Sentinel master address %q: bad port", cfg.MasterAddr)
	}
	quorum, downAfter, failoverTimeout := cfg.Quorum, cfg.DownAfter, cfg.FailoverTimeout
	if quorum == 0 {
		quorum = 1
	}
	if downAfter == 0 {
		downAfter = time.Second
	}
	if failoverTimeout == 0 {
		failoverTimeout = 5 * time.Second
	}
	if quorum < 0 || downAfter < time.Millisecond || failoverTimeout < time.Millisecond {
		return nil, fmt.Errorf("servers: Sentinel quorum %d, down-after %v, failover timeout %v: want positive values",
			quorum, downAfter, failoverTimeout)
	}
	conf := fmt.Sprintf("sentinel monitor %s %s %s %d\n"+
		"sentinel down-after-milliseconds %[1]s %[5]d\n"+
		"sentinel failover-timeout %[1]s %[6]d\n", cfg.MasterName, host, port, quorum,
		downAfter.Milliseconds(), failoverTimeout.Milliseconds())
	if cfg.Password != "" {
		conf += fmt.Sprintf("sentinel auth-pass %s %s\n", cfg.MasterName, cfg.Password)
	}
	var args []string
	if cfg.SentinelPassword != "" {
		args = []string{"--requirepass", cfg.SentinelPassword}
	}
	return LaunchRedis(RedisConfig{sentinel: conf, Args: args})
}
