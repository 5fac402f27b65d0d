package lockbench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock/internal/servers"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PGScenarios are the scenarios that need the PostgreSQL server.
var PGScenarios = []string{"P1", "P2"}

// pgEnv is what P1 and P2 run against: the PostgreSQL server and the
// program's redis-server.
type pgEnv struct {
	url   string
	redis *server
}

// startPG starts the benchmark's PostgreSQL server through internal/servers,
// creates pglock's objects in it, and returns it with its version.
func startPG() (*servers.Postgres, string, error) {
	pg, err := servers.LaunchPostgres()
	if err != nil {
		return nil, "", err
	}
	ctx := context.Background()
	version, err := func() (string, error) {
		pool, err := pgxpool.New(ctx, pg.URL())
		if err != nil {
			return "", err
		}
		defer pool.Close()
		c := pglock.New(pool)
		defer c.Close()
		if err := c.Migrate(ctx); err != nil {
			return "", err
		}
		var v string
		return v, pool.QueryRow(ctx, "SHOW server_version").Scan(&v)
	}()
	if err != nil {
		pg.Close()
		return nil, "", err
	}
	v, _, _ := strings.Cut(version, " ") // "15.18 (Debian 15.18-0+deb12u1)"
	return pg, v, nil
}

// runPG starts the PostgreSQL server, runs the selected P scenarios on it
// and on srv (see runGroup), and stops it.
func (res *Results) runPG(srv *server) {
	res.runGroup(PGScenarios, res.pg, "P: PostgreSQL", func() (func(sc string, c Contender, rep int) (Metrics, error), func(), error) {
		pg, version, err := startPG()
		if err != nil {
			return nil, nil, err
		}
		res.postgres = version
		progress(res.cfg, "P: PostgreSQL %s on %s", version, pg.Addr())
		env := pgEnv{url: pg.URL(), redis: srv}
		return func(sc string, c Contender, rep int) (Metrics, error) { return runPOne(sc, c, env, res.cfg, rep) },
			func() { pg.Close() }, nil
	})
}

func runPOne(sc string, c Contender, env pgEnv, cfg Config, rep int) (Metrics, error) {
	if err := env.redis.flush(); err != nil {
		return nil, err
	}
	runtime.GC()
	if sc == "P1" {
		return runP1(c, env, cfg, rep)
	}
	return runP2(c, env, cfg, rep)
}

// openP opens n independent clients of a P1/P2 contender.
func openP(c Contender, env pgEnv, n int) ([]Client, error) {
	if c.OpenPG == nil {
		return openAll(c, env.redis.addr(), n)
	}
	clients := make([]Client, 0, n)
	for range n {
		cl, err := c.OpenPG(env.url)
		if err != nil {
			closeAll(clients)
			return nil, fmt.Errorf("%s: open: %w", c.Name, err)
		}
		clients = append(clients, cl)
	}
	return clients, nil
}

// pName is the lock name of one run: its own per contender, scenario and
// repetition.
func pName(c Contender, sc string, rep int) string {
	run := "warmup"
	if rep >= 0 {
		run = "rep" + strconv.Itoa(rep)
	}
	return strings.ToLower(sc) + ":" + c.Name + ":" + run
}

// pCounters are the counters around the measured part of a run: the
// statements the clients' pools sent (PostgreSQL contenders), or the
// redis-server's INFO (the Redis one).
type pCounters struct {
	c       Contender
	clients []Client
	stmts   int64
	redis   stats
}

func takePCounters(env pgEnv, c Contender, clients []Client) (pCounters, error) {
	s := pCounters{c: c, clients: clients}
	if c.OpenPG == nil {
		var err error
		s.redis, err = env.redis.snapshot()
		return s, err
	}
	for _, cl := range clients {
		s.stmts += cl.(*pgClient).statements()
	}
	return s, nil
}

// per adds the counters' deltas since before, divided by n, to m.
func (after pCounters) per(before pCounters, n float64, m Metrics) {
	if after.c.OpenPG != nil {
		m["pg_stmts"] = ratio(float64(after.stmts-before.stmts), n)
		return
	}
	after.redis.addPer(before.redis, after.c.LuaInternal, n, m)
}

// runP1: one client, one goroutine, lock + release of one fixed name,
// uncontended: cycles/s, p50 and p99 of a cycle, statements (or Redis
// commands) per cycle.
func runP1(c Contender, env pgEnv, cfg Config, rep int) (Metrics, error) {
	clients, err := openP(c, env, 1)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	return counted(func() (pCounters, error) { return takePCounters(env, c, clients) }, "cycles", func(mark func() error) (Metrics, error) {
		return fixedCycles(clients[0], pName(c, "P1", rep), cfg, mark)
	})
}

// runP2: the hand-over loop of Z2 (see handOver) for P2's contenders:
// cfg.Clients independent clients, each its own pool and pglock.Client
// (or Redis client and redislock.Client), on one lock.
func runP2(c Contender, env pgEnv, cfg Config, rep int) (Metrics, error) {
	clients, err := openP(c, env, cfg.Clients)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	name := pName(c, "P2", rep)
	for i, cl := range clients { // connections open, statements prepared
		if err := cycle(context.Background(), cl, name+"-warm"+strconv.Itoa(i)); err != nil {
			return nil, err
		}
	}
	return counted(func() (pCounters, error) { return takePCounters(env, c, clients) }, "acq_all", func(mark func() error) (Metrics, error) {
		return handOver(c, clients, name, "P2", cfg, mark)
	})
}
