package lockbench

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"strconv"

	"github.com/dlock-go/dlock/internal/servers"
	"github.com/dlock-go/dlock/mysqllock"
)

// MScenarios are the scenarios that need the MariaDB server (and the
// PostgreSQL one, whose locks they are compared with).
var MScenarios = []string{"M1", "M2"}

// mEnv is what M1 and M2 run against: the MariaDB and PostgreSQL servers
// and the program's redis-server.
type mEnv struct {
	dsn   string
	admin *sql.DB // root on MariaDB, for the statement counter
	pg    pgEnv
}

// startMy starts the benchmark's MariaDB server through internal/servers,
// creates mysqllock's table in it, and returns it with its version.
func startMy() (*servers.MariaDB, string, error) {
	m, err := servers.LaunchMariaDB()
	if err != nil {
		return nil, "", err
	}
	ctx := context.Background()
	version, err := func() (string, error) {
		db, err := sql.Open("mysql", m.DSN())
		if err != nil {
			return "", err
		}
		defer db.Close()
		c := mysqllock.New(db)
		defer c.Close()
		if err := c.Migrate(ctx); err != nil {
			return "", err
		}
		var v string
		return v, db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v)
	}()
	if err != nil {
		m.Close()
		return nil, "", err
	}
	return m, version, nil
}

// runM starts the MariaDB and PostgreSQL servers, runs the selected M
// scenarios on them and on srv (see runGroup), and stops them.
func (res *Results) runM(srv *server) {
	res.runGroup(MScenarios, res.my, "M: MySQL", func() (func(sc string, c Contender, rep int) (Metrics, error), func(), error) {
		my, version, err := startMy()
		if err != nil {
			return nil, nil, err
		}
		pg, pgVersion, err := startPG()
		if err != nil {
			my.Close()
			return nil, nil, err
		}
		admin, err := sql.Open("mysql", my.RootDSN())
		if err != nil {
			my.Close()
			pg.Close()
			return nil, nil, err
		}
		res.mariadb, res.postgres = version, pgVersion
		progress(res.cfg, "M: MariaDB %s on %s, PostgreSQL %s on %s", version, my.Addr(), pgVersion, pg.Addr())
		env := mEnv{dsn: my.DSN(), admin: admin, pg: pgEnv{url: pg.URL(), redis: srv}}
		return func(sc string, c Contender, rep int) (Metrics, error) { return runMOne(sc, c, env, res.cfg, rep) },
			func() { admin.Close(); my.Close(); pg.Close() }, nil
	})
}

func runMOne(sc string, c Contender, env mEnv, cfg Config, rep int) (Metrics, error) {
	if err := env.pg.redis.flush(); err != nil {
		return nil, err
	}
	runtime.GC()
	clients, err := openM(c, env, map[string]int{"M1": 1, "M2": cfg.Clients}[sc])
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	name := pName(c, sc, rep)
	take := func() (mCounters, error) { return takeMCounters(env, c, clients) }
	if sc == "M1" {
		return counted(take, "cycles", func(mark func() error) (Metrics, error) {
			return fixedCycles(clients[0], name, cfg, mark)
		})
	}
	for i, cl := range clients { // connections open, statements prepared
		if err := cycle(context.Background(), cl, name+"-warm"+strconv.Itoa(i)); err != nil {
			return nil, err
		}
	}
	return counted(take, "acq_all", func(mark func() error) (Metrics, error) {
		return handOver(c, clients, name, "M2", cfg, mark)
	})
}

// openM opens n independent clients of an M1/M2 contender.
func openM(c Contender, env mEnv, n int) ([]Client, error) {
	if c.OpenMySQL == nil {
		return openP(c, env.pg, n)
	}
	clients := make([]Client, 0, n)
	for range n {
		cl, err := c.OpenMySQL(env.dsn)
		if err != nil {
			closeAll(clients)
			return nil, fmt.Errorf("%s: open: %w", c.Name, err)
		}
		clients = append(clients, cl)
	}
	return clients, nil
}

// mCounters are the counters around the measured part of a run: the
// MariaDB server's Questions (statements from clients; nothing else uses
// the server meanwhile), or P1's counters.
type mCounters struct {
	c         Contender
	questions int64
	p         pCounters
}

func takeMCounters(env mEnv, c Contender, clients []Client) (mCounters, error) {
	s := mCounters{c: c}
	if c.OpenMySQL == nil {
		var err error
		s.p, err = takePCounters(env.pg, c, clients)
		return s, err
	}
	var name string
	err := env.admin.QueryRow("SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &s.questions)
	s.questions-- // this statement
	return s, err
}

// per adds the counters' deltas since before, divided by n, to m.
func (after mCounters) per(before mCounters, n float64, m Metrics) {
	if after.c.OpenMySQL != nil {
		m["my_stmts"] = ratio(float64(after.questions-before.questions), n)
		return
	}
	after.p.per(before.p, n, m)
}
