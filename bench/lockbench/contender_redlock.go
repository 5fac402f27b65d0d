package lockbench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redislock/rueidisconn"
	"github.com/dlock-go/dlock/redlock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// RedlockNodes is the number of independent redis-servers of S4.
const RedlockNodes = 5

// RedlockContenders returns the S4 contenders (Redlock over RedlockNodes
// independent masters), the floor first. rueidislock runs only through the
// benchmark's router (rueidislockRouterContender): on its own it cannot
// address independent masters, see rueidislockRedlockProbe.
func RedlockContenders() []Contender {
	return []Contender{rawParallelContender(), dlockRedlock("goredis"), dlockRedlock("rueidis"),
		redsyncRedlock(true), redsyncRedlock(false), rueidislockRouterContender()}
}

// closeFuncs runs every close function, for clients opened before a failure.
func closeFuncs(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// ---- raw-parallel floor ----

func rawParallelContender() Contender {
	return Contender{
		Name:      "raw-parallel",
		Floor:     true,
		OpenNodes: openRawParallel,
		Config: fmt.Sprintf("%d go-redis v9 clients (default options), one per node; per cycle `SET key token NX PX 10000` "+
			"sent to all %d nodes at once (one goroutine per node, the caller's own goroutine taking node 0) and **all %d "+
			"replies awaited**; then `EVALSHA` compare-and-delete (SCRIPT LOAD once per node) on all %d at once, all awaited. "+
			"A quorum (%d) of OKs is required. No retry, no validity computation, no renewal: the cost of two parallel round "+
			"trips and nothing else.", RedlockNodes, RedlockNodes, RedlockNodes, RedlockNodes, RedlockNodes/2+1),
	}
}

type rawParallelClient struct {
	rdbs  []*redis.Client
	sha   string
	ttlMs string
}

func openRawParallel(addrs []string) (Client, error) {
	c := &rawParallelClient{ttlMs: fmt.Sprint(LockTTL.Milliseconds())}
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a})
		c.rdbs = append(c.rdbs, rdb)
		sha, err := rdb.ScriptLoad(context.Background(), rawReleaseSrc).Result()
		if err != nil {
			c.Close()
			return nil, err
		}
		c.sha = sha
	}
	return c, nil
}

// each runs f on every node at once and waits for all of them; it returns
// how many returned true and the errors joined.
func (c *rawParallelClient) each(f func(rdb *redis.Client) (bool, error)) (int, error) {
	n := len(c.rdbs)
	var (
		wg   sync.WaitGroup
		oks  = make([]bool, n)
		errs = make([]error, n)
	)
	for i := 1; i < n; i++ {
		wg.Go(func() { oks[i], errs[i] = f(c.rdbs[i]) })
	}
	oks[0], errs[0] = f(c.rdbs[0])
	wg.Wait()
	ok := 0
	for _, b := range oks {
		if b {
			ok++
		}
	}
	return ok, errors.Join(errs...)
}

var errRawQuorum = errors.New("raw-parallel: no quorum")

func (c *rawParallelClient) Lock(ctx context.Context, key string) (Release, error) {
	token := dlock.NewToken()
	quorum := len(c.rdbs)/2 + 1
	set, err := c.each(func(rdb *redis.Client) (bool, error) {
		err := rdb.Do(ctx, "SET", key, token, "NX", "PX", c.ttlMs).Err()
		if err == redis.Nil {
			return false, nil
		}
		return err == nil, err
	})
	release := func(ctx context.Context) error {
		n, err := c.each(func(rdb *redis.Client) (bool, error) {
			n, err := rdb.EvalSha(ctx, c.sha, []string{key}, token).Int64()
			return n == 1, err
		})
		if err == nil && n < quorum {
			err = errRawNotHeld
		}
		return err
	}
	if set < quorum {
		release(ctx)
		return nil, fmt.Errorf("%w: %d of %d nodes set the key (%v)", errRawQuorum, set, len(c.rdbs), err)
	}
	return release, nil
}

func (c *rawParallelClient) Close() error {
	for _, rdb := range c.rdbs {
		rdb.Close()
	}
	return nil
}

// ---- dlock redlock ----

func dlockRedlock(transport string) Contender {
	cfg := "redlock.Client over " + fmt.Sprint(RedlockNodes) + " goredisconn Conns (one go-redis v9 client per node, default options)"
	if transport == "rueidis" {
		cfg = "as dlock-redlock-goredis, over rueidisconn Conns: one rueidis client per node with `DisableCache: true, " +
			"ForceSingleClient: true`, other options default"
	} else {
		cfg += "; restart detection **on** (the default), the nodes pre-aged instead: after every FLUSHALL the " +
			"benchmark writes `HSET dlock:epoch created <now − 1h in ms> boot <the same> seen <LASTSAVE>` on each node, " +
			"so the real acquire path (LASTSAVE and epoch read, uptime check) is measured and the nodes vote at once; " +
			"node timeout 50ms (default). `NewMutex(key, WithTTL(10s))`, renewal on (default), `Lock` (uncontended: " +
			"one attempt) + `Release`. Acquire returns when a quorum (3) has voted, and writes the fence back only " +
			"when their counters disagree; Release returns when a quorum (3) has deleted the key."
	}
	return Contender{
		Name:           "dlock-redlock-" + transport,
		DlockTransport: transport,
		OpenNodes:      func(addrs []string) (Client, error) { return openRedlock(addrs, transport, nil) },
		Config:         cfg,
	}
}

// redlockClient is one redlock.Client over its own per-node Redis clients.
type redlockClient struct {
	c     *redlock.Client
	close []func()
}

// dialRedlockNodes opens one Redis client per node.
func dialRedlockNodes(addrs []string, transport string) ([]redislock.Conn, []func(), error) {
	var (
		conns  []redislock.Conn
		closes []func()
	)
	for _, a := range addrs {
		switch transport {
		case "goredis":
			rdb := redis.NewClient(&redis.Options{Addr: a})
			conns, closes = append(conns, goredisconn.New(rdb)), append(closes, func() { rdb.Close() })
		case "rueidis":
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}, DisableCache: true, ForceSingleClient: true})
			if err != nil {
				closeFuncs(closes)
				return nil, nil, err
			}
			conns, closes = append(conns, rueidisconn.New(c)), append(closes, c.Close)
		default:
			return nil, nil, errors.New("unknown dlock transport " + transport)
		}
	}
	return conns, closes, nil
}

// openRedlock opens a dlock Redlock client; wrap, if not nil, wraps each
// node's Conn (i is the node's index).
func openRedlock(addrs []string, transport string, wrap func(i int, c redislock.Conn) redislock.Conn) (*redlockClient, error) {
	conns, closes, err := dialRedlockNodes(addrs, transport)
	if err != nil {
		return nil, err
	}
	if wrap != nil {
		for i := range conns {
			conns[i] = wrap(i, conns[i])
		}
	}
	return &redlockClient{c: redlock.New(conns), close: closes}, nil
}

func (d *redlockClient) Lock(ctx context.Context, key string) (Release, error) {
	l, err := d.c.NewMutex(key, redlock.WithTTL(LockTTL)).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (d *redlockClient) Close() error {
	err := d.c.Close()
	closeFuncs(d.close)
	return err
}

// ---- redsync ----

func redsyncRedlock(failFast bool) Contender {
	c := Contender{
		Name:      "redsync",
		OpenNodes: func(addrs []string) (Client, error) { return openRedsyncNodes(addrs, failFast) },
		Config: "github.com/go-redsync/redsync/v4 " + moduleVersion("github.com/go-redsync/redsync/v4") + ", `redsync.New` over " +
			fmt.Sprint(RedlockNodes) + " goredis/v9 pools (one go-redis v9 client per node, default options); " +
			"`NewMutex(key)` with all defaults (expiry 8s, 32 tries, waits for **every** node's reply to SET NX and " +
			"to the delete script), `LockContext` / `UnlockContext`.",
	}
	if failFast {
		c.Name = "redsync-failfast"
		c.Config = "as redsync, with `NewMutex(key, redsync.WithFailFast(true))`: `LockContext` returns as soon as a " +
			"quorum (3) has set the key and `UnlockContext` as soon as 3 have deleted it (the other nodes' replies " +
			"arrive in the background)."
	}
	return c
}

type redsyncNodesClient struct {
	rdbs []*redis.Client
	rs   *redsync.Redsync
	opts []redsync.Option
}

func openRedsyncNodes(addrs []string, failFast bool) (Client, error) {
	c := &redsyncNodesClient{}
	var pools []redsyncredis.Pool
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a})
		c.rdbs = append(c.rdbs, rdb)
		pools = append(pools, redsyncgoredis.NewPool(rdb))
	}
	c.rs = redsync.New(pools...)
	if failFast {
		c.opts = []redsync.Option{redsync.WithFailFast(true)}
	}
	return c, nil
}

func (r *redsyncNodesClient) Lock(ctx context.Context, key string) (Release, error) {
	m := r.rs.NewMutex(key, r.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errRedsyncNotHeld
		}
		return err
	}, nil
}

func (r *redsyncNodesClient) Close() error {
	for _, rdb := range r.rdbs {
		rdb.Close()
	}
	return nil
}

// ---- rueidislock ----

// rueidislockRedlockProbe tries to build a rueidislock.Locker with
// KeyMajority 3 over the independent nodes at addrs, the only way its
// LockerOption accepts several addresses (ClientOption.InitAddress), and
// reports what happened. rueidislock has one rueidis.Client per Locker and
// puts its KeyMajority*2−1 keys ("<prefix>:<i>:<name>") on that one
// client: on a Redis Cluster they hash to different slots, on a standalone
// server they all land on the same server. rueidis.NewClient treats several
// InitAddress entries as seeds of one Cluster, so over independent
// standalone masters NewLocker fails; with ForceSingleClient it connects to
// one node only. Either way it cannot run Redlock over independent nodes.
func rueidislockRedlockProbe(addrs []string) string {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: addrs, DisableCache: true},
		KeyMajority:  3,
	})
	if err != nil {
		return "`rueidislock.NewLocker(LockerOption{KeyMajority: 3, ClientOption: {InitAddress: <the " +
			fmt.Sprint(len(addrs)) + " nodes>}})` fails: `" + strings.ReplaceAll(err.Error(), "`", "'") + "`"
	}
	defer l.Close()
	return fmt.Sprintf("`rueidislock.NewLocker` with the %d addresses returned a Locker backed by one %T "+
		"(one deployment, not %d independent masters)", len(addrs), l.Client(), len(addrs))
}
