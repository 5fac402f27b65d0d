package redislock_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redislock/rueidisconn"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// deployment is a set of real redis-server processes that tests lock on.
type deployment struct {
	servers []*testenv.Redis
	cluster bool
	// dial, if not nil, is how the clients that openers make connect:
	// through fault proxies, say (see unreachable).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (d *deployment) addrs() []string {
	a := make([]string, len(d.servers))
	for i, s := range d.servers {
		a[i] = s.Addr()
	}
	return a
}

func standalone(t testing.TB) *deployment {
	return &deployment{servers: []*testenv.Redis{testenv.StartRedis(t, testenv.RedisConfig{})}}
}

func cluster(t testing.TB) *deployment {
	c := testenv.StartCluster(t, 3)
	return &deployment{servers: c.Nodes, cluster: true}
}

// admin returns a go-redis client for out-of-band commands.
func (d *deployment) admin(t testing.TB) redis.UniversalClient {
	var c redis.UniversalClient
	if d.cluster {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: d.addrs()})
	} else {
		c = redis.NewClient(&redis.Options{Addr: d.addrs()[0]})
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// opener opens a new, independent connection to d.
type opener func(t testing.TB, d *deployment) redislock.Conn

func goRedis(t testing.TB, d *deployment) redislock.Conn {
	var c redis.UniversalClient
	if d.cluster {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: d.addrs(), ContextTimeoutEnabled: true, Dialer: d.dial})
	} else {
		// As the README builds it: go-redis's defaults (retries on), and
		// context deadlines bounding each call.
		c = redis.NewClient(&redis.Options{Addr: d.addrs()[0], ContextTimeoutEnabled: true, Dialer: d.dial})
	}
	t.Cleanup(func() { c.Close() })
	return goredisconn.New(c)
}

func rueidisClient(t testing.TB, d *deployment) redislock.Conn {
	o := rueidis.ClientOption{InitAddress: d.addrs(), DisableCache: true, ForceSingleClient: !d.cluster}
	if d.dial != nil {
		o.DialCtxFn = func(ctx context.Context, addr string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return d.dial(ctx, "tcp", addr)
		}
	}
	c, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return rueidisconn.New(c)
}

var transports = []struct {
	name string
	open opener
}{{"goredis", goRedis}, {"rueidis", rueidisClient}}

// newClient returns a redislock.Client on its own connection, closed when t
// ends (before the connection, as cleanups run last-in first-out).
func newClient(t testing.TB, d *deployment, open opener, opts ...redislock.ClientOption) *redislock.Client {
	c := redislock.New(open(t, d), opts...)
	t.Cleanup(func() { c.Close() })
	return c
}

func backend(d *deployment, open opener) dlocktest.Backend {
	return kindBackend(d, open, func(c *redislock.Client, key string, opts ...redislock.Option) dlock.Locker {
		return c.NewMutex(key, opts...)
	})
}

// lockOptions are the options of the lock that o asks for.
func lockOptions(o dlocktest.Options) []redislock.Option {
	opts := []redislock.Option{redislock.WithTTL(o.TTL), redislock.WithMaxHold(o.MaxHold)}
	if o.NoRenewal {
		opts = append(opts, redislock.WithoutRenewal())
	}
	return opts
}

// kinds are the kinds of lock redislock offers on one name, for
// dlocktest.RunKinds.
func kinds(d *deployment, open opener) []dlocktest.Kind {
	type maker = func(c *redislock.Client, key string, opts []redislock.Option) dlock.Locker
	kind := func(name string, lock dlock.Kind, holders int, make maker) dlocktest.Kind {
		return dlocktest.Kind{Name: name, Lock: lock, Holders: holders, New: func(t testing.TB, key string, o dlocktest.Options) dlock.Locker {
			return make(newClient(t, d, open, redislock.WithObserver(o.Observer)), key, lockOptions(o))
		}}
	}
	return []dlocktest.Kind{
		kind("Mutex", dlock.KindMutex, 1, func(c *redislock.Client, key string, opts []redislock.Option) dlock.Locker {
			return c.NewMutex(key, opts...)
		}),
		kind("ReentrantMutex", dlock.KindReentrantMutex, 1, func(c *redislock.Client, key string, opts []redislock.Option) dlock.Locker {
			return c.NewReentrantMutex(key, opts...)
		}),
		kind("FairMutex", dlock.KindFairMutex, 1, func(c *redislock.Client, key string, opts []redislock.Option) dlock.Locker {
			return c.NewFairMutex(key, opts...)
		}),
		kind("RWMutex.read", dlock.KindRWMutex, dlocktest.AnyNumber, func(c *redislock.Client, key string, opts []redislock.Option) dlock.Locker {
			return c.NewRWMutex(key, opts...).Reader()
		}),
		kind("RWMutex.write", dlock.KindRWMutex, 1, func(c *redislock.Client, key string, opts []redislock.Option) dlock.Locker {
			return c.NewRWMutex(key, opts...).Writer()
		}),
		kind("Semaphore(2)", dlock.KindSemaphore, 2, func(c *redislock.Client, key string, opts []redislock.Option) dlock.Locker {
			return c.NewSemaphore(key, 2, opts...)
		}),
		kind("Election", dlock.KindMutex, 1, func(c *redislock.Client, key string, opts []redislock.Option) dlock.Locker {
			return dlocktest.Campaigner(c.NewElection(key, opts...))
		}),
	}
}

// kindBackend is the conformance backend of the kind of lock that newLock
// makes on d.
func kindBackend(d *deployment, open opener, newLock func(c *redislock.Client, key string, opts ...redislock.Option) dlock.Locker) dlocktest.Backend {
	var clients dlocktest.Closers
	return dlocktest.Backend{
		NewLocker: func(t testing.TB, key string, o dlocktest.Options) dlock.Locker {
			c := newClient(t, d, open, redislock.WithObserver(o.Observer))
			return clients.Add(newLock(c, key, lockOptions(o)...), c.Close)
		},
		Kinds:       kinds(d, open),
		CloseClient: clients.Close,
		ErrClosed:   redislock.ErrClosed,
		Sabotage: func(t testing.TB, key string) {
			if err := d.admin(t).Del(context.Background(), lockKey(key)).Err(); err != nil {
				t.Fatalf("DEL: %v", err)
			}
		},
		Pause: func(t testing.TB, dur time.Duration) {
			for _, s := range d.servers {
				if err := s.Pause(); err != nil {
					t.Errorf("pause: %v", err)
				}
			}
			time.Sleep(dur)
			for _, s := range d.servers {
				if err := s.Resume(); err != nil {
					t.Errorf("resume: %v", err)
				}
			}
		},
		RestartEmpty: func(t testing.TB) {
			for _, s := range d.servers {
				if err := s.Restart(); err != nil {
					t.Fatalf("restart: %v", err)
				}
			}
			if d.cluster {
				waitClusterOK(t, d)
			}
		},
		Leftovers: func(t testing.TB, key string) []string {
			return leftovers(t, d, key)
		},
		Admin: func(t testing.TB) dlock.Admin { return newClient(t, d, open) },
		Inspect: func(t testing.TB, key string) dlock.Info {
			return inspect(t, newClient(t, d, open), key)
		},
		Restart: func(t testing.TB) {
			for _, s := range d.servers {
				// As a server that persists its data: with a save point,
				// it writes a snapshot as it shuts down, and loads it
				// when it starts again (with its own configuration).
				if _, err := s.Do("CONFIG", "SET", "save", "3600 1"); err != nil {
					t.Fatalf("CONFIG SET save: %v", err)
				}
				if err := s.Restart(); err != nil {
					t.Fatalf("restart: %v", err)
				}
			}
			if d.cluster {
				waitClusterOK(t, d)
			}
		},
		Unreachable: func(t testing.TB, key string, o dlocktest.Options) (dlock.Locker, func(refuse bool)) {
			conn, fail := unreachable(t, d, open)
			c := redislock.New(conn, redislock.WithObserver(o.Observer))
			t.Cleanup(func() { c.Close() })
			return clients.Add(newLock(c, key, lockOptions(o)...), c.Close), fail
		},
		TryLockBound: redislock.AttemptTimeout,
	}
}

// unreachable returns a Conn to d, made by open, whose every connection
// passes through a fault proxy, and a function that makes the proxies
// fail: silent (connections open, nothing forwarded) or, with refuse,
// refusing new connections and resetting the open ones.
func unreachable(t testing.TB, d *deployment, open opener) (redislock.Conn, func(refuse bool)) {
	via := map[string]*testenv.Proxy{}
	for _, a := range d.addrs() {
		via[a] = testenv.StartProxy(t, a)
	}
	proxied := *d
	proxied.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p, ok := via[addr]; ok {
			addr = p.Addr()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	return open(t, &proxied), func(refuse bool) {
		for _, p := range via {
			if refuse {
				p.SetRefuse(true)
				p.Reset()
			} else {
				p.Blackhole(true)
			}
		}
	}
}

func lockKey(name string) string { return "dlock:{" + name + "}" }

// leftovers lists the lock key, its line of waiting clients and any
// subscription to its channel.
func leftovers(t testing.TB, d *deployment, key string) []string {
	ctx := context.Background()
	var left []string
	if n, err := d.admin(t).Exists(ctx, lockKey(key)).Result(); err != nil || n > 0 {
		left = append(left, fmt.Sprintf("lock key (exists=%d, err=%v)", n, err))
	}
	if n, err := d.admin(t).Exists(ctx, lockKey(key)+":waiting").Result(); err != nil || n > 0 {
		left = append(left, fmt.Sprintf("line of waiting clients (exists=%d, err=%v)", n, err))
	}
	for _, s := range d.servers {
		out, err := s.Do("PUBSUB", "NUMSUB", lockKey(key)+":released")
		if err != nil || out != lockKey(key)+":released\n0" {
			left = append(left, fmt.Sprintf("subscription on %s: %q %v", s.Addr(), out, err))
		}
	}
	return left
}

func waitClusterOK(t testing.TB, d *deployment) {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ok := true
		for _, s := range d.servers {
			if out, err := s.Do("CLUSTER", "INFO"); err != nil || !strings.Contains(out, "cluster_state:ok") {
				ok = false
			}
		}
		if ok {
			return
		}
	}
	t.Fatal("cluster did not come back to cluster_state:ok")
}

// The conformance suites (dlocktest.Run) take most of the package's time,
// nearly all of it waiting out TTLs, pauses and restarts. They run side by
// side (t.Parallel: as many at once as go test's -parallel, GOMAXPROCS by
// default), each in a process of its own (see apart) and on servers of its
// own, since the suite pauses and restarts every server of its deployment. So does every test of the
// package that starts its own servers, but for the two that change
// package-wide settings (SetRequestMemory, SetResendFor), which run
// first, alone. Each transport runs the Mutex
// suite on both topologies; the other kinds' suites differ from the
// Mutex's in their scripts and Go code above redislock.Conn, not in what
// the transports do, so each runs once per topology, on one transport or
// the other (see TestIntegrationFairConformance).
func TestIntegrationConformanceStandalone(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			if !apart(t) {
				dlocktest.Run(t, backend(standalone(t), tr.open))
			}
		})
	}
}

func TestIntegrationObserver(t *testing.T) {
	t.Parallel()
	dlocktest.RunObserver(t, backend(standalone(t), goRedis))
}

func TestIntegrationKinds(t *testing.T) {
	t.Parallel()
	dlocktest.RunKinds(t, backend(standalone(t), goRedis))
}

func TestIntegrationConformanceCluster(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			if !apart(t) {
				dlocktest.Run(t, backend(cluster(t), tr.open))
			}
		})
	}
}

// A go-redis failover client finds the master through a real Sentinel.
func TestIntegrationSentinel(t *testing.T) {
	t.Parallel()
	master := testenv.StartRedis(t, testenv.RedisConfig{})
	sentinel := testenv.StartSentinel(t, master, "dlock-master")
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "dlock-master",
		SentinelAddrs: []string{sentinel.Addr()}})
	t.Cleanup(func() { rdb.Close() })
	c := redislock.New(goredisconn.New(rdb))
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := c.NewMutex("via-sentinel").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock through Sentinel: %v", err)
	}
	// An attempt that ran late on a loaded machine and found its own
	// grant marks the key for a waiter's wake-up (redisscript.WaiterMark).
	if out, _ := master.Do("GET", lockKey("via-sentinel")); out != lease.Token() && out != lease.Token()+"\x01" {
		t.Fatalf("the master holds %q; want the lease's token", out)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func electionBackend(d *deployment, open opener) dlocktest.ElectionBackend {
	options := func(o dlocktest.Options) []redislock.Option {
		opts := []redislock.Option{redislock.WithTTL(o.TTL)}
		if o.NoRenewal {
			opts = append(opts, redislock.WithoutRenewal())
		}
		return opts
	}
	return dlocktest.ElectionBackend{
		NewElection: func(t testing.TB, name string, o dlocktest.Options) dlock.Election {
			return newClient(t, d, open).NewElection(name, options(o)...)
		},
		CutOff: func(t testing.TB, name string, o dlocktest.Options) (dlock.Election, func()) {
			c, cut := cutOffClient(t, d)
			return c.NewElection(name, options(o)...), cut
		},
		// The lock key's expiry, by the server's clock (see NewElection):
		// the drift allowance plus the latency of the leader's last
		// renewal (from its send to the server running it) after its
		// Until. On a loaded two-core machine that latency has been
		// 195ms (a Cluster, go-redis), beyond the suite's Slack; a TTL
		// allows for a renewal whose reply came just before Until.
		LeaderHorizon: dlocktest.ElectionTTL,
	}
}

// inspect returns what c.Inspect reports for name, failing t on an error.
func inspect(t testing.TB, c *redislock.Client, name string) dlock.Info {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := c.Inspect(ctx, name)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", name, err)
	}
	return info
}

// cutOffClient returns a redislock.Client (on go-redis) whose every
// connection to d passes through a proxy of its own, and a function that
// cuts them all off, as a paused process or a partition would.
func cutOffClient(t testing.TB, d *deployment) (*redislock.Client, func()) {
	via := map[string]*testenv.Proxy{}
	for _, a := range d.addrs() {
		via[a] = testenv.StartProxy(t, a)
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p, ok := via[addr]; ok {
			addr = p.Addr()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	var rdb redis.UniversalClient
	if d.cluster {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: d.addrs(), ContextTimeoutEnabled: true, Dialer: dial})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: d.addrs()[0], ContextTimeoutEnabled: true, Dialer: dial})
	}
	t.Cleanup(func() { rdb.Close() })
	c := redislock.New(goredisconn.New(rdb))
	t.Cleanup(func() { c.Close() })
	return c, func() {
		for _, p := range via {
			p.Blackhole(true)
			t.Cleanup(func() { p.Blackhole(false); p.Reset() })
		}
	}
}
