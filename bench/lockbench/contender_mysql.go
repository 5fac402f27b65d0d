package lockbench

import (
	"context"
	"database/sql"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/mysqllock"
	_ "github.com/go-sql-driver/mysql"
)

// M1 and M2 contenders: dlock's mysqllock in both modes, pglock in both
// modes and dlock's redislock.Mutex, in one run.
const (
	MyLeaseName   = "dlock-mysql-lease"
	MySessionName = "dlock-mysql-session"
)

// MContenders are M1's and M2's contenders. MySQL ones have OpenMySQL,
// PostgreSQL ones OpenPG, the Redis one Open.
func MContenders() []Contender {
	pg := PGContenders()
	return []Contender{
		{Name: MyLeaseName, OpenMySQL: func(dsn string) (Client, error) { return openMy(dsn, lease) },
			Config: "mysqllock.Mutex (lease mode: a row per lock, taken by one UPDATE … LAST_INSERT_ID(fence) on the database's " +
				"UTC clock, an UPDATE by token to release) on its own mysqllock.Client over its own *sql.DB (go-sql-driver/mysql " +
				"defaults); `WithTTL(10s)`, renewal on, `Lock` with the default retry (exponential 2–64ms jittered poll, bounded " +
				"by the holder's expiry; no push across clients). One Mutex per Lock call."},
		{Name: MySessionName, OpenMySQL: func(dsn string) (Client, error) { return openMy(dsn, session) },
			Config: "mysqllock.SessionMutex (session mode: GET_LOCK on a pool connection the lease keeps, then the row as in " +
				"lease mode, wait_timeout set; released with the row update, RELEASE_LOCK and wait_timeout restored) on its own " +
				"mysqllock.Client and *sql.DB as dlock-mysql-lease; `WithTTL(10s)`, renewal on, the default retry. One " +
				"SessionMutex per Lock call."},
		pg[0], pg[1], pg[2],
	}
}

// myClient is one mysqllock.Client on its own pool.
type myClient struct {
	db   *sql.DB
	c    *mysqllock.Client
	mode pgMode
}

func openMy(dsn string, mode pgMode) (Client, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	return &myClient{db: db, c: mysqllock.New(db), mode: mode}, nil
}

func (m *myClient) Lock(ctx context.Context, name string) (Release, error) {
	var l dlock.Locker = m.c.NewMutex(name, mysqllock.WithTTL(LockTTL))
	if m.mode == session {
		l = m.c.NewSessionMutex(name, mysqllock.WithTTL(LockTTL))
	}
	lease, err := l.Lock(ctx)
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}

func (m *myClient) Close() error {
	err := m.c.Close()
	m.db.Close()
	return err
}
