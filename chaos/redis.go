package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/servers"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

// redisFaults are the faults of a single Redis and of Redlock.
var redisFaults = []string{FaultKillEmpty, FaultClientPause, FaultExpire, FaultKill, FaultPause, FaultPartition,
	FaultBlackhole, FaultLatency, FaultReset}

// A single Redis server: redislock.Mutex.
var _ = register(&service{
	backends: []string{BackendRedis, BackendRedisAOF},
	client:   "redis",
	needs:    "redis-server", pkg: "redis-server", look: lookRedis,
	tls: true,
	start: func(d *deployment, _ int) error {
		return d.startRedis(1, servers.RedisConfig{Persistence: d.backend == BackendRedisAOF})
	},
	connect: func(c *client, _ context.Context, opTimeout time.Duration) (dlock.Locker, func(), error) {
		conns, closeAll, err := c.redisConns(opTimeout)
		if err != nil {
			return nil, nil, err
		}
		rc := redislock.New(conns[0], redislock.WithObserver(c))
		return rc.NewMutex(c.cfg.Name, redislock.WithTTL(c.cfg.TTL)), func() { rc.Close(); closeAll() }, nil
	},
	faults:       map[string][]string{BackendRedis: redisFaults, BackendRedisAOF: redisFaults},
	injects:      map[string]injectFunc{FaultExpire: injectExpire},
	restartEmpty: redisRestartEmpty,
	expect: func(backend, fault string, _ Kind) string {
		switch {
		case fault == FaultExpire:
			return limitExpire
		case fault == FaultKillEmpty, fault == FaultKill && backend == BackendRedis:
			return limitForgot
		}
		return ""
	},
})

// Redlock over several independent Redis servers: redlock.Mutex.
var _ = register(&service{
	backends: []string{BackendRedlock3, BackendRedlock3RDB, BackendRedlock5},
	client:   "redlock",
	needs:    "redis-server", pkg: "redis-server", look: lookRedis,
	tls: true,
	start: func(d *deployment, _ int) error {
		switch d.backend {
		case BackendRedlock3RDB:
			return d.startRedis(3, servers.RedisConfig{Args: []string{"--save", "1 1"}})
		case BackendRedlock5:
			return d.startRedis(5, servers.RedisConfig{})
		}
		return d.startRedis(3, servers.RedisConfig{})
	},
	connect: func(c *client, _ context.Context, opTimeout time.Duration) (dlock.Locker, func(), error) {
		conns, closeAll, err := c.redisConns(opTimeout)
		if err != nil {
			return nil, nil, err
		}
		// Every client of the run takes the same TTL, so the restart
		// window (which bounds every TTL of the deployment) is that TTL:
		// a server that restarts sits out one TTL, and new servers vote
		// one TTL after they start.
		cfg := c.cfg
		rl := redlock.New(conns, redlock.WithObserver(c), redlock.WithNodeTimeout(nodeTimeout(cfg)),
			redlock.WithRestartWindow(cfg.TTL))
		return rl.NewMutex(cfg.Name, redlock.WithTTL(cfg.TTL)), func() { rl.Close(); closeAll() }, nil
	},
	faults: map[string][]string{BackendRedlock3: redisFaults, BackendRedlock5: redisFaults,
		// its point: a server back from an old snapshot
		BackendRedlock3RDB: {FaultKill, FaultKillEmpty, FaultClientPause, FaultExpire, FaultPause, FaultPartition,
			FaultBlackhole, FaultLatency, FaultReset}},
	injects:      map[string]injectFunc{FaultExpire: injectExpire},
	restartEmpty: redisRestartEmpty,
	recordsAs:    map[string]string{FaultExpire: FaultExpireBare},
	expect: func(_, fault string, _ Kind) string {
		if fault == FaultExpireBare {
			return limitBareMajority
		}
		return ""
	},
})

// nodeTimeout is a Redlock client's node timeout in a run of cfg: a tenth
// of the TTL, at most 200ms, so that a dead node costs little of it; with
// TLS a tenth of the TTL, which must hold a handshake on a loaded host.
func nodeTimeout(cfg clientConfig) time.Duration {
	if cfg.TLS != nil {
		return cfg.TTL / 10
	}
	return min(cfg.TTL/10, 200*time.Millisecond)
}

// lookRedis returns an error if redis-server is not installed.
func lookRedis() error {
	_, err := servers.LookBinary("redis-server")
	return err
}

// startRedis starts n Redis servers with cfg, each with a TLS port of its
// own with TLS.
func (d *deployment) startRedis(n int, cfg servers.RedisConfig) error {
	d.closers = append(d.closers, d.closeRedis)
	if err := lookRedis(); err != nil {
		return err
	}
	base := cfg.Args
	for range n {
		if d.certs != nil {
			args, port, err := d.redisTLSArgs()
			if err != nil {
				return err
			}
			cfg.Args = append(slices.Clone(base), args...)
			d.tlsAddrs = append(d.tlsAddrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		}
		r, err := servers.LaunchRedis(cfg)
		if err != nil {
			return err
		}
		d.redis = append(d.redis, r)
		addr := r.Addr()
		if d.tlsAddrs != nil {
			addr = d.tlsAddrs[len(d.redis)-1]
		}
		d.nodes = append(d.nodes, node{addr: addr, proc: r})
	}
	return nil
}

// closeRedis stops the Redis servers, then the link proxies.
func (d *deployment) closeRedis() error {
	var errs []error
	for _, r := range d.redis {
		r.Resume() // a paused server cannot be stopped gracefully
		errs = append(errs, r.Close())
	}
	for _, l := range d.links {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// redisRestartEmpty starts killed server i again without its data.
func redisRestartEmpty(d *deployment, i int) error {
	r := d.redis[i]
	for _, f := range []string{"appendonlydir", "appendonly.aof", "dump.rdb"} {
		if err := os.RemoveAll(filepath.Join(r.Dir(), f)); err != nil {
			return fmt.Errorf("chaos: wiping %s: %w", d.name(i), err)
		}
	}
	return r.Restart()
}

// lockValues returns the lock key's value on each Redis server: "" where
// the key is absent or the server did not answer.
func (d *deployment) lockValues(name string) []string {
	vs := make([]string, len(d.redis))
	for i, r := range d.redis {
		vs[i], _ = r.Do("GET", "dlock:{"+name+"}")
	}
	return vs
}

// expireScript expires KEYS[1] now if its value is still ARGV[1].
const expireScript = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], 1) end return 0`

// expire makes the lock key on Redis server i expire now, if its value is
// still value; it reports whether it did.
func (d *deployment) expire(i int, name, value string) (bool, error) {
	if len(d.redis) == 0 {
		return false, errors.New("chaos: expire is a Redis fault")
	}
	n, err := d.redis[i].Do("EVAL", expireScript, "1", "dlock:{"+name+"}", value)
	return n == "1", err
}

// injectExpire plans FaultExpire: the lock key expires now on one server
// that holds it.
func injectExpire(in *injector, ctx context.Context, f *injection) error {
	f.hold = 0
	in.awaitHolder(ctx) // expiring a free lock shows nothing
	var value string
	var on int
	f.node, value, on, f.kind = in.expiryTarget(f.node)
	f.target = in.d.name(f.node)
	if n := in.d.servers(); n > 1 {
		f.target += fmt.Sprintf(", the key on %d of %d nodes", on, n)
	}
	node := f.node
	f.apply = func() error {
		expired, err := in.d.expire(node, in.name, value)
		if err == nil && !expired {
			in.hist.Add(Event{Op: OpLog, Value: "expire: the key changed before it could expire; nothing done"})
		}
		return err
	}
	f.heal = func() error { return nil }
	return nil
}

// expiryTarget picks the server whose lock key an expire fault makes
// expire: one that holds the key, else node. It returns the key's value
// there, on how many servers the key has that value, and the kind to
// record: FaultExpireBare on Redlock when the key stood on no more than a
// majority of the nodes, so that what is left after the expiry is less
// than a majority.
func (in *injector) expiryTarget(node int) (int, string, int, string) {
	vs := in.d.lockValues(in.name)
	var held []int
	for i, v := range vs {
		if v != "" {
			held = append(held, i)
		}
	}
	if len(held) > 0 {
		node = held[in.rng.IntN(len(held))]
	}
	value, kind := vs[node], FaultExpire
	on := 0
	if value != "" {
		on = count(vs, value)
	}
	if n := len(vs); n > 1 && on > 0 && on <= n/2+1 {
		kind = FaultExpireBare
	}
	return node, value, on, kind
}

// count returns how many of vs are v.
func count(vs []string, v string) int {
	n := 0
	for _, x := range vs {
		if x == v {
			n++
		}
	}
	return n
}

// redisConns returns a go-redis connection to each of the client's
// proxies, and what closes them all.
func (c *client) redisConns(opTimeout time.Duration) ([]redislock.Conn, func(), error) {
	cfg := c.cfg
	redis.SetLogger(quietRedis{})
	var conns []redislock.Conn
	var closers []func()
	for _, addr := range cfg.Addrs {
		o := &redis.Options{Addr: addr, DialTimeout: opTimeout, ReadTimeout: opTimeout,
			WriteTimeout: opTimeout, PoolTimeout: opTimeout, MaxRetries: -1, ContextTimeoutEnabled: true,
			DisableIdentity: true}
		if cfg.LibraryDefaults {
			o = &redis.Options{Addr: addr, ContextTimeoutEnabled: true}
		}
		if cfg.TLS != nil {
			tc, err := cfg.TLS.config()
			if err != nil {
				return nil, nil, fmt.Errorf("TLS: %w", err)
			}
			o.TLSConfig, o.Username, o.Password = tc, cfg.TLS.User, cfg.TLS.Password
		}
		rdb := redis.NewClient(o)
		conns = append(conns, goredisconn.New(rdb))
		closers = append(closers, func() { rdb.Close() })
	}
	closeAll := func() {
		for _, f := range closers {
			f()
		}
	}
	return conns, closeAll, nil
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
