package backend

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/mysqllock"
	"github.com/go-sql-driver/mysql"
)

// EnvMySQL is read when no backend flag is given.
const EnvMySQL = "DLOCK_MYSQL" // a MySQL or MariaDB DSN, user:password@tcp(host:port)/db

// parseMySQL checks a DSN in the form github.com/go-sql-driver/mysql
// reads (user:password@tcp(host:port)/db?param=value), or a URL
// mysql://user:password@host:port/db, which it turns into one.
func parseMySQL(raw string) (*mysql.Config, error) {
	shown := cmdutil.RedactInput(raw)
	if strings.HasPrefix(raw, "mysql://") {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return nil, cmdutil.Usagef("--mysql %q is not a URL; want mysql://user:password@host:port/db or a DSN, user:password@tcp(host:port)/db", shown)
		}
		cfg := mysql.NewConfig()
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
		cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, strings.TrimPrefix(u.Path, "/")
		if u.Port() == "" {
			cfg.Addr = u.Host + ":3306"
		}
		if len(u.Query()) > 0 {
			return nil, cmdutil.Usagef("--mysql %q: a mysql:// URL takes no parameters; give a DSN, user:password@tcp(host:port)/db?param=value, for those", shown)
		}
		return checkMySQL(cfg, shown)
	}
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" && strings.Contains(raw, "://") {
		return nil, cmdutil.Usagef("--mysql %q: scheme %q is not supported; use a DSN, user:password@tcp(host:port)/db, or mysql://user:password@host:port/db", shown, u.Scheme)
	}
	cfg, err := mysql.ParseDSN(raw)
	if err != nil {
		return nil, cmdutil.Usagef("--mysql %q: %v; want user:password@tcp(host:port)/db", shown, cmdutil.RedactIn(err.Error(), raw))
	}
	return checkMySQL(cfg, shown)
}

// checkMySQL refuses a DSN without a database, which mysqllock's table
// needs, and fills in a dial timeout.
func checkMySQL(cfg *mysql.Config, shown string) (*mysql.Config, error) {
	if cfg.DBName == "" {
		return nil, cmdutil.Usagef("--mysql %q names no database; want user:password@tcp(host:port)/db", shown)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = AnswerTimeout
	}
	return cfg, nil
}

// MySQL or MariaDB: --mysql, mysqllock, in lease mode or (--session)
// session mode.
var _ = register(&driver{
	name: "mysql", title: "MySQL", order: 5,
	flag: "mysql", example: "--mysql user:password@tcp(host:port)/db",
	env: []string{EnvMySQL},
	flags: func(fs *flag.FlagSet, f *Flags) {
		fs.StringVar(&f.MySQL, "mysql", "", "MySQL or MariaDB DSN, user:password@tcp(host:port)/db, or mysql://user:password@host:port/db (env "+EnvMySQL+")")
	},
	given:   func(f *Flags) bool { return f.MySQL != "" },
	fromEnv: func(f *Flags, getenv func(string) string) { f.MySQL = getenv(EnvMySQL) },
	resolve: func(f *Flags, _ func(string) string, filed string, spec *Spec) error {
		if f.TLS.given() {
			return cmdutil.Usagef("the TLS flags do not apply to --mysql; set TLS in the DSN (tls=true, or a registered configuration)")
		}
		if _, err := mysqllock.SchemaSQL(f.Table); err != nil {
			return cmdutil.Usagef("--table %s: %s", cmdutil.Quote(f.Table), cmdutil.Reason(err))
		}
		cfg, err := parseMySQL(f.MySQL)
		if err != nil {
			return err
		}
		if filed != "" {
			if cfg.Passwd != "" {
				return cmdutil.Usagef("--password-file and a password in the --mysql DSN: give one")
			}
			cfg.Passwd = filed
		}
		spec.MySQL = cfg
		return nil
	},
	session:   true,
	table:     true,
	claims:    func(s Spec) bool { return s.MySQL != nil },
	describe:  func(s Spec) string { return describeMySQL(s.MySQL) },
	checkName: checkMySQLName,
	checkKind: func(_ Spec, kind string) error {
		return cmdutil.Usagef("--kind %s is not available with MySQL; it has only --kind mutex (with --session for session mode)", kind)
	},
	nodes: func(s Spec) []Node {
		return []Node{{Addr: s.MySQL.Addr, Spec: Spec{MySQL: s.MySQL.Clone(), Session: s.Session, Table: s.Table}}}
	},
	connect: connectMySQL,
	refused: mysqlRefused,
	denied:  mysqlDenied,
	woken:   "waiters find it free when they next try",
	oncePer: true,
	waiters: waitersUncounted,
})

// myConn is a pool of connections to one MySQL or MariaDB database.
type myConn struct {
	c       *mysqllock.Client
	db      *sql.DB
	session bool
	runs    string // the table of the records of --once-per, quoted
	table   string // mysqllock's table, quoted
}

// connectMySQL opens a pool, checks that the database answers, and
// creates mysqllock's table if it does not exist (mysqllock.Client.Migrate),
// unless the spec is ReadOnly.
func connectMySQL(ctx context.Context, spec Spec, obs dlock.Observer) (conn, error) {
	QuietMySQLLogs()
	connector, err := mysql.NewConnector(spec.MySQL)
	if err != nil {
		return nil, cmdutil.Usagef("--mysql: %v", err)
	}
	db := sql.OpenDB(connector)
	// database/sql retries a connection that fails as bad twice more:
	// one answer timeout bounds all three.
	pctx, cancel := context.WithTimeout(ctx, AnswerTimeout)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		if pctx.Err() != nil {
			return nil, fmt.Errorf("mysql %s does not answer within %v: %w", describeMySQL(spec.MySQL), AnswerTimeout, err)
		}
		return nil, mysqlRefused(err)
	}
	opts := []mysqllock.ClientOption{mysqllock.WithObserver(obs)}
	if spec.Table != "" {
		opts = append(opts, mysqllock.WithTable(spec.Table))
	}
	m := &myConn{c: mysqllock.New(db, opts...), db: db, session: spec.Session, runs: myRunsTable(spec.Table), table: myTable(spec.Table)}
	if !spec.ReadOnly {
		if err := m.c.Migrate(ctx); err != nil {
			m.close()
			return nil, mysqlDenied(err)
		}
	}
	return m, nil
}

func (m *myConn) locker(name string, o LockOptions) (dlock.Locker, error) {
	opts := []mysqllock.Option{mysqllock.WithTTL(o.TTL), mysqllock.WithMaxHold(o.MaxHold)}
	if m.session {
		return m.c.NewSessionMutex(name, opts...), nil
	}
	return m.c.NewMutex(name, opts...), nil
}

func (m *myConn) election(name string, ttl time.Duration) (dlock.Election, error) {
	if m.session {
		return nil, cmdutil.Usagef("--session is not available for elections; a MySQL election uses a lease-mode mutex")
	}
	return m.c.NewElection(name, mysqllock.WithTTL(ttl)), nil
}

func (m *myConn) admin(name string) (dlock.Admin, string, string) { return m.c, name, "" }

func (m *myConn) close() {
	m.c.Close()
	m.db.Close()
}

// mysqlRefused turns a refused login, an unknown database or a DSN
// parameter the server refuses into a UsageError: a mistake in the DSN,
// which no retry fixes.
func mysqlRefused(err error) error {
	var my *mysql.MySQLError
	if errors.As(err, &my) && (my.Number == 1045 || my.Number == 1044 || my.Number == 1049 || my.Number == 1698) {
		return cmdutil.Usagef("%s (error %d); check the user, password and database of --mysql or %s, and --password-file", my.Message, my.Number, EnvMySQL)
	}
	if errors.As(err, &my) && (my.Number == 1193 || my.Number == 1231 || my.Number == 1232) {
		// An unknown system variable, or a bad value for one: a DSN
		// parameter that the driver passed on as SET.
		return cmdutil.Usagef("%s (error %d); check the parameters of --mysql or %s", my.Message, my.Number, EnvMySQL)
	}
	return err
}

// mysqlDenied turns a privilege the account lacks (errors 1142 and 1044)
// into a UsageError: the message names the grant, and no retry helps.
func mysqlDenied(err error) error {
	var my *mysql.MySQLError
	if errors.As(err, &my) && (my.Number == 1142 || my.Number == 1044) {
		return cmdutil.Usagef("%s; 'dlock schema mysql' prints the SQL of dlock's tables, for an administrator to run", cmdutil.Reason(err))
	}
	return err
}

// describeMySQL names the database for messages: "host:port/db".
func describeMySQL(cfg *mysql.Config) string { return fmt.Sprintf("%s/%s", cfg.Addr, cfg.DBName) }

// checkMySQLName checks what mysqllock refuses in a lock name.
func checkMySQLName(name string) error {
	if len(name) > mysqllock.MaxNameBytes {
		return cmdutil.Usagef("lock name %s is too long: MySQL lock names are at most %d bytes", cmdutil.Quote(name), mysqllock.MaxNameBytes)
	}
	return nil
}

// QuietMySQLLogs silences the MySQL driver's own log lines, as
// QuietRedisLogs does go-redis's.
func QuietMySQLLogs() { mysql.SetLogger(quietMySQL{}) }

// quietMySQL drops the driver's log lines ("unexpected EOF" on a
// connection the server closed): the errors reach the user through
// dlock's own messages.
type quietMySQL struct{}

func (quietMySQL) Print(...any) {}

// The records of --once-per are rows of the table of the locks' (--table,
// or mysqllock.DefaultTable) with "_runs" appended, made by dlock when it
// first needs it; times are microseconds since 1970 on the database's UTC
// clock, as mysqllock's.

// myNow is the database's clock in microseconds since 1970, UTC.
const myNow = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"

// myRunsTable is the quoted name of the table of the records of --once-per
// beside the locks' table, table ("" for mysqllock's default).
func myRunsTable(table string) string {
	return "`" + strings.Join(strings.Split(cmp.Or(table, mysqllock.DefaultTable)+"_runs", "."), "`.`") + "`"
}

// myCreateRuns is the SQL that creates the table of the records of
// --once-per, runs (quoted).
func myCreateRuns(runs string) string {
	return `CREATE TABLE IF NOT EXISTS ` + runs + ` (
    name        VARBINARY(1024) NOT NULL PRIMARY KEY,
    finished_at BIGINT          NOT NULL,
    expires_at  BIGINT          NOT NULL
) ENGINE=InnoDB`
}

func (m *myConn) lastRun(ctx context.Context, name string) (time.Duration, bool, error) {
	if _, err := m.db.ExecContext(ctx, myCreateRuns(m.runs)); err != nil {
		return 0, false, fmt.Errorf("creating %s: %w", m.runs, err)
	}
	var us int64
	err := m.db.QueryRowContext(ctx, `SELECT `+myNow+` - finished_at FROM `+m.runs+` WHERE name = ? AND expires_at > `+myNow, name).Scan(&us)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the record of the last run: %w", err)
	}
	return time.Duration(us) * time.Microsecond, true, nil
}

func (m *myConn) recordRun(ctx context.Context, name string, keep time.Duration) error {
	_, err := m.db.ExecContext(ctx, myCreateRuns(m.runs)) // before the transaction: it commits
	var tx *sql.Tx
	if err == nil {
		tx, err = m.db.BeginTx(ctx, nil)
	}
	if err == nil {
		defer tx.Rollback()
		if _, err = tx.ExecContext(ctx, `DELETE FROM `+m.runs+` WHERE expires_at <= `+myNow); err == nil {
			_, err = tx.ExecContext(ctx, `INSERT INTO `+m.runs+` (name, finished_at, expires_at) VALUES (?, `+myNow+`, `+myNow+` + ?)
				ON DUPLICATE KEY UPDATE finished_at = VALUES(finished_at), expires_at = VALUES(expires_at)`, name, keep.Microseconds())
		}
		if err == nil {
			err = tx.Commit()
		}
	}
	if err != nil {
		return fmt.Errorf("recording the run: %w", err)
	}
	return nil
}

func (m *myConn) clearRun(ctx context.Context, name string) (bool, error) {
	res, err := m.db.ExecContext(ctx, `DELETE FROM `+m.runs+` WHERE name = ?`, name)
	var my *mysql.MySQLError
	if errors.As(err, &my) && my.Number == 1146 { // no table: no record
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("removing the record of the last run: %w", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}
