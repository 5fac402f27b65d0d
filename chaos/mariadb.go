package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/servers"
	"github.com/dlock-go/dlock/mysqllock"
	"github.com/go-sql-driver/mysql"
)

// One MariaDB server: mysqllock's lease mode (Mutex) or session mode
// (SessionMutex, GET_LOCK).
var _ = register(&service{
	backends: []string{BackendMariaDB, BackendMariaDBSession},
	needs:    "MariaDB", pkg: "mariadb-server", look: servers.LookMariaDB,
	start: startMariaDB,
	connect: func(c *client, _ context.Context, _ time.Duration) (dlock.Locker, func(), error) {
		return c.connectMariaDB()
	},
	faults:  map[string][]string{BackendMariaDB: sqlFaults, BackendMariaDBSession: sqlFaults},
	injects: map[string]injectFunc{FaultTerminate: injectTerminate(killConnections)},
})

// mariaDB returns the MariaDB server of d.
func mariaDB(d *deployment) *servers.MariaDB { return d.state.(*servers.MariaDB) }

// mdbPassword is the password of the clients' accounts on MariaDB.
const mdbPassword = "chaos"

// mdbUser is the account of client id (1-based), by which the terminate
// fault finds its connections: MariaDB has no application_name.
func mdbUser(id int) string { return fmt.Sprintf("chaos_client_%d", id) }

// startMariaDB starts one MariaDB server, creates mysqllock's table in it,
// so that no client races another to create it, and an account for each
// of the clients.
func startMariaDB(d *deployment, clients int) error {
	if err := servers.LookMariaDB(); err != nil {
		return err
	}
	m, err := servers.LaunchMariaDB()
	if err != nil {
		return err
	}
	d.state = m
	d.closers = append(d.closers, m.Close) // resumes a paused server
	d.nodes = []node{{addr: m.Addr(), proc: m}}
	ctx, cancel := context.WithTimeout(context.Background(), pgAdminTimeout)
	defer cancel()
	db, err := sql.Open("mysql", m.RootDSN())
	if err != nil {
		return fmt.Errorf("chaos: mariadb: %w", err)
	}
	defer db.Close()
	for id := 1; id <= clients; id++ {
		for _, stmt := range []string{
			fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'127.0.0.1' IDENTIFIED BY '%s'", mdbUser(id), mdbPassword),
			fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON `%s`.* TO '%s'@'127.0.0.1'", servers.MariaDBDatabase, mdbUser(id)),
		} {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("chaos: mariadb: %w", err)
			}
		}
	}
	c := mysqllock.New(db)
	defer c.Close()
	if err := c.Migrate(ctx); err != nil {
		return fmt.Errorf("chaos: mariadb: %w", err)
	}
	return nil
}

// killConnections ends every connection of client c (0-based) with KILL
// CONNECTION, from a connection of the harness's own straight to the
// server, and returns how many it ended.
func killConnections(d *deployment, c int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pgAdminTimeout)
	defer cancel()
	db, err := sql.Open("mysql", mariaDB(d).RootDSN())
	if err != nil {
		return 0, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?", mdbUser(c+1))
	if err != nil {
		return 0, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	n := 0
	for _, id := range ids {
		if _, err := db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err == nil {
			n++
		}
	}
	return n, rows.Err()
}

// connectMariaDB makes the mysqllock Mutex or SessionMutex the client
// contends for, on a pool of connections through its proxy, as the
// client's own account so that the terminate fault can find them.
func (c *client) connectMariaDB() (dlock.Locker, func(), error) {
	mysql.SetLogger(quietMySQL{})
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = mdbUser(c.cfg.ID), mdbPassword
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", c.cfg.Addrs[0], servers.MariaDBDatabase
	cfg.Timeout = min(c.cfg.TTL/4, time.Second)
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, nil, err
	}
	db := sql.OpenDB(conn)
	mc := mysqllock.New(db, mysqllock.WithObserver(c))
	stop := func() { mc.Close(); db.Close() }
	if c.cfg.Kind == BackendMariaDBSession {
		return mc.NewSessionMutex(c.cfg.Name, mysqllock.WithTTL(c.cfg.TTL)), stop, nil
	}
	return mc.NewMutex(c.cfg.Name, mysqllock.WithTTL(c.cfg.TTL)), stop, nil
}

// quietMySQL drops the driver's log lines about connections that the
// faults break.
type quietMySQL struct{}

func (quietMySQL) Print(...any) {}
