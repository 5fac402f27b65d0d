package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/servers"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// sqlFaults are the faults of PostgreSQL and MariaDB.
var sqlFaults = []string{FaultTerminate, FaultKill, FaultClientPause, FaultPartition, FaultPause, FaultBlackhole,
	FaultLatency, FaultReset}

// One PostgreSQL server: pglock's lease mode (Mutex) or session mode
// (SessionMutex).
var _ = register(&service{
	backends: []string{BackendPostgres, BackendPostgresSession},
	needs:    "PostgreSQL", pkg: "postgresql", look: servers.LookPostgres,
	start: startPostgres,
	connect: func(c *client, ctx context.Context, _ time.Duration) (dlock.Locker, func(), error) {
		return c.connectPostgres(ctx)
	},
	faults:  map[string][]string{BackendPostgres: sqlFaults, BackendPostgresSession: sqlFaults},
	injects: map[string]injectFunc{FaultTerminate: injectTerminate(terminate)},
})

// pgServer returns the PostgreSQL server of d.
func pgServer(d *deployment) *servers.Postgres { return d.state.(*servers.Postgres) }

// pgAdminTimeout bounds what the harness itself asks of PostgreSQL: the
// schema at the start, and each terminate fault.
const pgAdminTimeout = 10 * time.Second

// startPostgres starts one PostgreSQL server and creates pglock's tables
// in it, so that no client races another to create them.
func startPostgres(d *deployment, _ int) error {
	if err := servers.LookPostgres(); err != nil {
		return err
	}
	pg, err := servers.LaunchPostgres()
	if err != nil {
		return err
	}
	d.state = pg
	d.closers = append(d.closers, pg.Close) // resumes a paused server
	d.nodes = []node{{addr: pg.Addr(), proc: pg}}
	ctx, cancel := context.WithTimeout(context.Background(), pgAdminTimeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, pg.URL())
	if err != nil {
		return fmt.Errorf("chaos: postgres: %w", err)
	}
	defer pool.Close()
	c := pglock.New(pool)
	defer c.Close()
	if err := c.Migrate(ctx); err != nil {
		return fmt.Errorf("chaos: postgres: %w", err)
	}
	return nil
}

// pgApplication is the application_name of client id's connections, by
// which the terminate fault finds its backends.
func pgApplication(id int) string { return fmt.Sprintf("dlock-chaos-client-%d", id) }

// pgClientURL is the connection string of client id, through its proxy
// at addr.
func pgClientURL(addr string, id int) string {
	return fmt.Sprintf("postgres://%s@%s/postgres?sslmode=disable&application_name=%s",
		servers.PostgresUser, addr, pgApplication(id))
}

// terminate ends every backend of client c (0-based) with
// pg_terminate_backend, from a connection of the harness's own straight
// to the server, and returns how many it ended.
func terminate(d *deployment, c int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pgAdminTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgServer(d).URL())
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
		pgApplication(c+1)).Scan(&n)
	return n, err
}
