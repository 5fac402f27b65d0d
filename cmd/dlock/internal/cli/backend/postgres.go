package backend

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvPostgres is read when no backend flag is given.
const EnvPostgres = "DLOCK_POSTGRES" // a PostgreSQL URL, postgres://user:password@host:port/db

// parsePostgres checks a PostgreSQL URL (or key=value connection string)
// the way pgxpool reads it.
func parsePostgres(raw string) (*pgxpool.Config, error) {
	shown := cmdutil.RedactInput(raw)
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, cmdutil.Usagef("--postgres %q: scheme %q is not supported; use postgres://user:password@host:port/db", shown, u.Scheme)
	}
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		msg := err.Error()
		var pe *pgconn.ParseConfigError
		if i := strings.LastIndex(msg, "`: "); errors.As(err, &pe) && i >= 0 {
			// "cannot parse `…`: why": the message quotes the input
			// already, redacted, and pgx's redaction cannot be sure.
			msg = msg[i+3:]
		}
		return nil, cmdutil.Usagef("--postgres %q: %v", shown, cmdutil.RedactIn(msg, raw))
	}
	return cfg, nil
}

// PostgreSQL: --postgres, pglock, in lease mode or (--session) session
// mode. The records of --once-per are rows of RunsTable.
var _ = register(&driver{
	name: "postgres", title: "PostgreSQL", order: 4,
	flag: "postgres", example: "--postgres postgres://host:port/db",
	env: []string{EnvPostgres},
	flags: func(fs *flag.FlagSet, f *Flags) {
		fs.StringVar(&f.Postgres, "postgres", "", "PostgreSQL URL, postgres://user:password@host:port/db (env "+EnvPostgres+")")
	},
	given:   func(f *Flags) bool { return f.Postgres != "" },
	fromEnv: func(f *Flags, getenv func(string) string) { f.Postgres = getenv(EnvPostgres) },
	resolve: func(f *Flags, _ func(string) string, filed string, spec *Spec) error {
		if _, err := pglock.SchemaSQL(f.Table); err != nil {
			return cmdutil.Usagef("--table %s: %s", cmdutil.Quote(f.Table), cmdutil.Reason(err))
		}
		cfg, err := parsePostgres(f.Postgres)
		if err != nil {
			return err
		}
		if filed != "" {
			if hasPassword(f.Postgres) {
				return cmdutil.Usagef("--password-file and a password in the --postgres URL: give one")
			}
			cfg.ConnConfig.Password = filed
		}
		if f.TLS.given() {
			if err := f.TLS.applyPostgres(cfg); err != nil {
				return err
			}
		}
		spec.Postgres = cfg
		return nil
	},
	session:   true,
	table:     true,
	claims:    func(s Spec) bool { return s.Postgres != nil },
	describe:  func(s Spec) string { return describePostgres(s.Postgres) },
	checkName: checkPGName,
	checkKind: func(_ Spec, kind string) error {
		return cmdutil.Usagef("--kind %s is not available with PostgreSQL; it has only --kind mutex (with --session for session mode)", kind)
	},
	nodes: func(s Spec) []Node {
		addr := fmt.Sprintf("%s:%d", s.Postgres.ConnConfig.Host, s.Postgres.ConnConfig.Port)
		return []Node{{Addr: addr, Spec: Spec{Postgres: s.Postgres.Copy(), Session: s.Session, Table: s.Table}}}
	},
	connect: connectPostgres,
	refused: pgRefused,
	denied:  postgresDenied,
	oncePer: true,
	woken:   "waiters were notified",
	waiters: waitersUncounted,
})

// pgConn is a pool of connections to one PostgreSQL database.
type pgConn struct {
	c       *pglock.Client
	pool    *pgxpool.Pool
	tls     string // what TLS the connection negotiated
	where   string // Spec.Describe
	session bool
	runs    string // the table of the records of --once-per, quoted
	table   string // pglock's table, quoted
}

// connectPostgres opens a pool, checks that the database answers, and
// creates pglock's table if it does not exist (pglock.Client.Migrate),
// unless the spec is ReadOnly.
func connectPostgres(ctx context.Context, spec Spec, obs dlock.Observer) (conn, error) {
	pool, err := pgxpool.NewWithConfig(ctx, spec.Postgres)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, AnswerTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		if pctx.Err() != nil {
			return nil, fmt.Errorf("postgres %s does not answer within %v: %w", describePostgres(spec.Postgres), AnswerTimeout, err)
		}
		return nil, pgRefused(pgParameter(err))
	}
	p := &pgConn{pool: pool, tls: negotiated(ctx, pool), where: spec.Describe(), session: spec.Session, runs: pgRunsTable(spec.Table), table: pgTable(spec.Table)}
	opts := []pglock.ClientOption{pglock.WithObserver(obs)}
	if spec.Table != "" {
		opts = append(opts, pglock.WithTable(spec.Table))
	}
	p.c = pglock.New(pool, opts...)
	if !spec.ReadOnly {
		if err := p.c.Migrate(ctx); err != nil {
			p.close()
			return nil, postgresDenied(err)
		}
	}
	return p, nil
}

func (p *pgConn) locker(name string, o LockOptions) (dlock.Locker, error) {
	opts := []pglock.Option{pglock.WithTTL(o.TTL), pglock.WithMaxHold(o.MaxHold)}
	if p.session {
		return p.c.NewSessionMutex(name, opts...), nil
	}
	return p.c.NewMutex(name, opts...), nil
}

func (p *pgConn) election(name string, ttl time.Duration) (dlock.Election, error) {
	if p.session {
		return nil, cmdutil.Usagef("--session is not available for elections; a PostgreSQL election uses a lease-mode mutex")
	}
	return p.c.NewElection(name, pglock.WithTTL(ttl)), nil
}

func (p *pgConn) admin(name string) (dlock.Admin, string, string) { return p.c, name, "" }

func (p *pgConn) describe() string { return p.where + " (" + p.tls + ")" }

func (p *pgConn) close() {
	if p.c != nil {
		p.c.Close()
	}
	p.pool.Close()
}

// pgRefused turns a refused login into a UsageError: a mistake in the URL,
// which no retry fixes.
func pgRefused(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "28") || pe.Code == "3D000") {
		return cmdutil.Usagef("%s (SQLSTATE %s); check the user, password and database of --postgres or %s, and --password-file", pe.Message, pe.Code, EnvPostgres)
	}
	return err
}

// pgParameter turns the server's refusal of a run-time parameter of the
// URL (?search_pat=..., which pgx sends the server as given) into a
// UsageError, as mysqlRefused does a DSN's: a mistake in the URL, which
// no retry fixes.
func pgParameter(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42704" || pe.Code == "22023") && strings.Contains(pe.Message, "parameter") {
		return cmdutil.Usagef("%s (SQLSTATE %s); check the parameters of --postgres or %s (pgx sends those it does not know to the server as settings)", pe.Message, pe.Code, EnvPostgres)
	}
	return err
}

// postgresDenied turns a privilege the role lacks (SQLSTATE 42501) into a
// UsageError: the message names the grant, and no retry helps.
func postgresDenied(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" {
		return cmdutil.Usagef("%s; 'dlock schema postgres' prints the SQL of dlock's tables, for an administrator to run", cmdutil.Reason(err))
	}
	return err
}

// describePostgres names the database for messages: "host:port/db".
func describePostgres(cfg *pgxpool.Config) string {
	return fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
}

// checkPGName checks what pglock refuses in a lock name.
func checkPGName(name string) error {
	if len(name) > pglock.MaxNameBytes {
		return cmdutil.Usagef("lock name %s is too long: PostgreSQL lock names are at most %d bytes", cmdutil.Quote(name), pglock.MaxNameBytes)
	}
	if !utf8.ValidString(name) {
		return cmdutil.Usagef("lock name %s is not valid UTF-8", cmdutil.Quote(name))
	}
	return nil
}

// negotiated says what TLS a connection of pool has: "TLS 1.3, certificate
// verified", "TLS 1.3, certificate NOT verified" (sslmode=require or
// prefer), or "no TLS".
func negotiated(ctx context.Context, pool *pgxpool.Pool) string {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return "TLS unknown"
	}
	defer c.Release()
	tc, ok := c.Conn().PgConn().Conn().(*tls.Conn)
	if !ok {
		return "no TLS"
	}
	verified := "certificate verified"
	// pgx verifies sslmode=verify-ca and verify-full itself, with
	// InsecureSkipVerify set and a function of its own.
	if cfg := c.Conn().Config().TLSConfig; cfg == nil || cfg.InsecureSkipVerify && cfg.VerifyPeerCertificate == nil && cfg.VerifyConnection == nil {
		verified = "certificate NOT verified"
	}
	return tls.VersionName(tc.ConnectionState().Version) + ", " + verified
}

// The records of --once-per are rows of the table of the locks' (--table,
// or pglock.DefaultTable) with "_runs" appended, made by dlock when it
// first needs it.

// pgRunsTable is the quoted name of the table of the records of --once-per
// beside the locks' table, table ("" for pglock's default).
func pgRunsTable(table string) string {
	return pgx.Identifier(strings.Split(cmp.Or(table, pglock.DefaultTable)+"_runs", ".")).Sanitize()
}

// pgCreateRuns is the SQL that creates the table of the records of
// --once-per, runs (quoted).
func pgCreateRuns(runs string) string {
	return `CREATE TABLE IF NOT EXISTS ` + runs + ` (
	name        text PRIMARY KEY,
	finished_at timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL
)`
}

func (p *pgConn) lastRun(ctx context.Context, name string) (time.Duration, bool, error) {
	if _, err := p.pool.Exec(ctx, pgCreateRuns(p.runs)); err != nil {
		return 0, false, fmt.Errorf("creating %s: %w", p.runs, err)
	}
	var ms float64
	err := p.pool.QueryRow(ctx, `SELECT extract(epoch FROM now() - finished_at) * 1000 FROM `+p.runs+
		` WHERE name = $1 AND expires_at > now()`, name).Scan(&ms)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the record of the last run: %w", err)
	}
	return time.Duration(ms * float64(time.Millisecond)), true, nil
}

func (p *pgConn) recordRun(ctx context.Context, name string, keep time.Duration) error {
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, pgCreateRuns(p.runs)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+p.runs+` WHERE expires_at <= now()`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+p.runs+` (name, finished_at, expires_at)
			VALUES ($1, now(), now() + $2 * interval '1 millisecond')
			ON CONFLICT (name) DO UPDATE SET finished_at = excluded.finished_at, expires_at = excluded.expires_at`,
			name, keep.Milliseconds())
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the run: %w", err)
	}
	return nil
}

func (p *pgConn) clearRun(ctx context.Context, name string) (bool, error) {
	tag, err := p.pool.Exec(ctx, `DELETE FROM `+p.runs+` WHERE name = $1`, name)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // no table: no record
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("removing the record of the last run: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// hasPassword reports whether a PostgreSQL URL or connection string
// carries a password: in its user information, or as a parameter or
// keyword.
func hasPassword(raw string) bool {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if _, set := u.User.Password(); set {
			return true
		}
	}
	return pgPasswordKey.MatchString(raw)
}

// pgPasswordKey matches the password parameter of a PostgreSQL URL or the
// password keyword of a connection string.
var pgPasswordKey = regexp.MustCompile(`(?i)(^|[\s?&])password\s*=`)
