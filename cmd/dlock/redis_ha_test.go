package main_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// redisHADeployment is a deployment over rdb, a client of a Redis Cluster
// or of a Sentinel's master, named to dlock by flags.
func redisHADeployment(t testing.TB, rdb redis.UniversalClient, flags ...string) deployment {
	t.Cleanup(func() { rdb.Close() })
	key := func(name string) string { return "dlock:{" + name + "}" }
	return deployment{
		flags: flags,
		held: func(t testing.TB, name string) bool {
			n, err := rdb.Exists(context.Background(), key(name)).Result()
			if err != nil {
				t.Fatalf("EXISTS: %v", err)
			}
			return n > 0
		},
		sabotage: func(t testing.TB, name string) {
			if err := rdb.Del(context.Background(), key(name)).Err(); err != nil {
				t.Fatalf("DEL: %v", err)
			}
		},
	}
}

// A Redis Cluster (--redis-cluster) and a master that Sentinels monitor
// (--redis-sentinel, --redis-master) are reachable from the command, as
// they are from redislock: the same conflicts, inspect, release, list and
// --once-per as a single Redis.
func TestIntegrationRedisClusterAndSentinel(t *testing.T) {
	t.Parallel()
	t.Run("Cluster", func(t *testing.T) {
		t.Parallel()
		c := testenv.StartCluster(t, 3)
		addrs := c.Addrs()
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		d := redisHADeployment(t, rdb, "--redis-cluster", strings.Join(addrs[:2], ","))
		redisHASuite(t, d)
	})
	t.Run("Sentinel", func(t *testing.T) {
		t.Parallel()
		master := testenv.StartRedis(t, testenv.RedisConfig{})
		sentinel := testenv.StartSentinel(t, master, "locks")
		rdb := redis.NewClient(&redis.Options{Addr: master.Addr()})
		d := redisHADeployment(t, rdb, "--redis-sentinel", sentinel.Addr(), "--redis-master", "locks")
		redisHASuite(t, d)
		// A master the Sentinels do not know is a failure to reach the
		// service, named.
		r := dlock(t, nil, "run", "--redis-sentinel", sentinel.Addr(), "--redis-master", "other", lockName(t), "--", "true")
		if r.code != 69 || !strings.Contains(r.stderr, "other") {
			t.Errorf("a master the Sentinels do not monitor: exit %d, %q; want 69 naming it", r.code, r.stderr)
		}
	})
}

// Sentinels with a password of their own (requirepass in sentinel.conf)
// are reached with DLOCK_REDIS_SENTINEL_PASSWORD; without it, or with a
// wrong one, the command says which variable to set (exit 64), and the
// password is neither echoed nor passed to COMMAND.
func TestIntegrationRedisSentinelPassword(t *testing.T) {
	t.Parallel()
	master := testenv.StartRedis(t, testenv.RedisConfig{})
	sentinel := testenv.StartSentinelConfig(t, testenv.SentinelConfig{MasterName: "locks", MasterAddr: master.Addr(), SentinelPassword: "sentinel-pw"})
	name := lockName(t)
	args := []string{"run", "-v", "--redis-sentinel", sentinel.Addr(), "--redis-master", "locks", name, "--", "sh", "-c", "echo ${DLOCK_REDIS_SENTINEL_PASSWORD:-unset}"}
	for _, tc := range []struct {
		env  []string
		code int
		want string
	}{
		{nil, 64, backend.EnvRedisSentinelPassword},
		{[]string{backend.EnvRedisSentinelPassword + "=wrong-pw"}, 64, backend.EnvRedisSentinelPassword},
		{[]string{backend.EnvRedisSentinelPassword + "=sentinel-pw"}, 0, "unset"},
	} {
		r := dlock(t, tc.env, args...)
		if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.want) || strings.Contains(r.stdout+r.stderr, "sentinel-pw") || strings.Contains(r.stdout+r.stderr, "wrong-pw") {
			t.Errorf("Sentinels with a password, env %q: exit %d, stdout %q, stderr %q; want %d, %q, no password", tc.env, r.code, r.stdout, r.stderr, tc.code, tc.want)
		}
	}
}

func redisHASuite(t *testing.T, d deployment) {
	t.Run("ConflictAndInterrupt", func(t *testing.T) { conflictAndInterrupt(t, d) })
	t.Run("InspectAndForceRelease", func(t *testing.T) { inspectAndForceRelease(t, d) })
	t.Run("List", func(t *testing.T) { listHeldUnderPrefix(t, d) })
	t.Run("OncePer", func(t *testing.T) {
		name := lockName(t)
		for i, want := range []string{"ran", "less than --once-per"} {
			r := dlock(t, nil, runArgs(d, "--once-per", "1h", name, "--", "echo", "ran")...)
			if r.code != 0 || !strings.Contains(r.stdout+r.stderr, want) {
				t.Errorf("run %d --once-per 1h: exit %d, stdout %q, stderr %q; want 0 and %q", i, r.code, r.stdout, r.stderr, want)
			}
		}
	})
}

// The flags of a Redis Cluster and of Sentinels are checked before
// anything is contacted: each mistake is a usage error (exit 64) naming
// the flag.
func TestIntegrationRedisHAUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--redis-sentinel", "127.0.0.1:26379"}, nil, "--redis-master"},
		{[]string{"--redis-master", "locks", "--redis", "redis://127.0.0.1:1"}, nil, "--redis-master goes with --redis-sentinel"},
		{[]string{"--redis-cluster", "127.0.0.1:7000", "--redis", "redis://127.0.0.1:1"}, nil, "give one"},
		{nil, []string{"DLOCK_REDIS_CLUSTER=127.0.0.1:7000", "DLOCK_REDIS_SENTINEL=127.0.0.1:26379"}, "give one"},
		{[]string{"--redis-cluster", "redis://:secret-word@127.0.0.1:7000"}, nil, "without a scheme or credentials"},
		{[]string{"--redis-cluster", "127.0.0.1"}, nil, "is not host:port"},
		{[]string{"--redis-cluster", "127.0.0.1:7000,,127.0.0.1:7001"}, nil, "empty address"},
	} {
		args := append(append([]string{"run"}, tc.args...), "name", "--", "true")
		r := dlock(t, tc.env, args...)
		if r.code != 64 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "secret-word") {
			t.Errorf("dlock %q (env %q): exit %d, %q; want 64 saying %q, no password", args, tc.env, r.code, r.stderr, tc.want)
		}
	}
}
