package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// A Dialect is the SQL of one database: Postgres, MySQL (which covers
// MariaDB) or SQLite.
type Dialect struct {
	name       string
	column     string // the type of the resource column
	lockSuffix string // what makes a SELECT read the newest row and lock it
	numbered   bool   // placeholders are $1, $2, … rather than ?
	// upsert records $2 for $1 unless a higher fence is recorded, or
	// $2 exceeds the recorded one by more than $3; {{table}} is the
	// table.
	upsert string
	// mayNotAutocommit is set where a session may not autocommit
	// (MySQL's autocommit=0), so that a statement run on a *sql.DB may
	// never be committed.
	mayNotAutocommit bool
	// syncCommit, run first in a Store's transaction, asks for its commit
	// to be on disk before the database answers; "" where a session
	// cannot ask.
	syncCommit string
	// durable, if not "", reads 1 when the server puts every commit on
	// disk before it answers, whatever the session asks.
	durable string
}

var (
	// Postgres is the dialect of PostgreSQL.
	Postgres = Dialect{
		name:       "PostgreSQL",
		column:     "text",
		lockSuffix: " FOR UPDATE",
		numbered:   true,
		syncCommit: "SELECT set_config('synchronous_commit', 'on', true)",
		upsert: `INSERT INTO {{table}} AS f (resource, fence) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence
WHERE f.fence <= excluded.fence AND excluded.fence - f.fence <= $3`,
	}
	// MySQL is the dialect of MySQL and MariaDB (InnoDB tables). The first
	// writers of a new resource may meet in a deadlock that InnoDB breaks
	// by failing one of them (error 1213): nothing is written, and the
	// write may be retried. Its table keeps resource names as varbinary,
	// compared byte for byte: the collations of varchar compare "acct"
	// and "acct " equal (PAD SPACE), and many compare "Acct" and "acct"
	// equal too.
	MySQL = Dialect{
		name:             "MySQL",
		column:           "varbinary(255)",
		lockSuffix:       " FOR UPDATE",
		mayNotAutocommit: true,
		durable:          "SELECT @@GLOBAL.innodb_flush_log_at_trx_commit = 1",
		upsert: `INSERT INTO {{table}} (resource, fence) VALUES (?, ?)
ON DUPLICATE KEY UPDATE fence = CASE WHEN VALUES(fence) <= fence OR VALUES(fence) - fence > ? THEN fence ELSE VALUES(fence) END`,
	}
	// SQLite is the dialect of SQLite 3.24 or later. SQLite has one writer
	// at a time: open the database with a busy timeout, so that writers
	// wait for each other rather than fail with SQLITE_BUSY, and call Check
	// before the transaction's first read (or begin it IMMEDIATE): a
	// transaction that has read cannot wait to become the writer.
	SQLite = Dialect{
		name:   "SQLite",
		column: "text",
		upsert: `INSERT INTO {{table}} (resource, fence) VALUES (?, ?)
ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence
WHERE fence <= excluded.fence AND excluded.fence - fence <= ?`,
	}
)

// String returns the name of the database, such as "PostgreSQL".
func (d Dialect) String() string { return d.name }

// placeholder returns the placeholder of the nth argument (from 1).
func (d Dialect) placeholder(n int) string {
	if d.numbered {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// DefaultTable is the table in which an SQL guard keeps its fences unless
// told otherwise with WithTable.
const DefaultTable = "dlock_fences"

// maxSQLResource is the longest resource name, in bytes, that an SQL
// guard accepts: what a MySQL primary key column can hold.
const maxSQLResource = 255

// An SQL guards resources kept in a database reached through
// database/sql: it keeps, in a table with a row per resource, the highest
// fence written to each, and refuses a write whose fence is lower. An SQL
// is safe for concurrent use; it holds no connection of its own.
type SQL struct {
	dialect Dialect
	config
}

// identifier is a table name that needs no quoting in any dialect, with an
// optional schema (or database) name before a dot.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// NewSQL returns a guard for a database of the given dialect, configured
// by WithTable, WithObserver, WithMaxJump and AcceptFenceLoss. An invalid
// option is reported by the guard's first call.
func NewSQL(dialect Dialect, opts ...Option) *SQL {
	g := &SQL{dialect: dialect, config: newConfig(opts)}
	if g.dialect.upsert == "" && g.err == nil {
		g.err = errors.New("fence: NewSQL needs a Dialect: fence.Postgres, fence.MySQL or fence.SQLite")
	}
	return g
}

// Schema returns the statement that creates the guard's table if it does
// not exist, for a migration tool.
func (g *SQL) Schema() string {
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n    resource %s NOT NULL PRIMARY KEY,\n    fence    bigint NOT NULL\n)",
		g.table, g.dialect.column)
}

// Migrate creates the guard's table, if it does not exist, in db. It
// looks for the table first, with a SELECT that reads no row, so that an
// account that may read and write the table but not create tables can
// call it once the table exists.
func (g *SQL) Migrate(ctx context.Context, db *sql.DB) error {
	if g.err != nil {
		return g.err
	}
	if g.exists(ctx, db) {
		return nil
	}
	if _, err := db.ExecContext(ctx, g.Schema()); err != nil {
		return fmt.Errorf("fence: creating table %s: %w", g.table, err)
	}
	return nil
}

// exists reports whether the guard's table exists in db. It looks in a
// transaction that it rolls back: in a session that does not autocommit
// (MySQL's autocommit=0), the SELECT would otherwise leave a transaction
// open on a pooled connection, holding a lock on the table that an ALTER
// TABLE waits for.
func (g *SQL) exists(ctx context.Context, db *sql.DB) bool {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, "SELECT 1 FROM "+g.table+" WHERE 1 = 0")
	if err != nil {
		return false
	}
	rows.Close()
	return true
}

// Check records fence as the newest written to resource, in the caller's
// transaction tx, unless a higher one has been recorded: then it returns a
// *StaleError, matching ErrStale. When Check returns an error, the caller
// must roll tx back, so that nothing it wrote is kept. An equal fence
// passes: a holder may write as often as it likes under one lease.
//
// Resources whose names differ never share a fence: if the table's
// resource column compares two different names equal (a table made by
// hand, or for MySQL before the column was varbinary, whose collation
// ignores trailing blanks or case), Check returns an error that says so
// rather than compare one name's fence with the other's.
//
// resource names what the writes touch (a row, a table, an account); fence
// is the Fence of the lease under which the caller writes, from any dlock
// backend, so long as one resource is always guarded by one lock.
//
// Check leaves the resource's row locked until tx ends, so the writers of
// one resource take turns: a later holder's Check waits for an earlier
// transaction to end, and a stale holder's Check after the later one's
// commit fails. Put Check first in the transaction and the writes it
// guards after it.
//
// It decides on the newest recorded fence at any isolation level, even
// where the transaction's reads see an older snapshot (MySQL's
// REPEATABLE READ). A transaction that reads a snapshot can also be
// refused by the database itself, if a later holder's Check committed
// after the snapshot was taken: PostgreSQL, at REPEATABLE READ or
// SERIALIZABLE, fails with a serialization failure (SQLSTATE 40001), and
// SQLite with SQLITE_BUSY_SNAPSHOT. The caller rolls back then too.
func (g *SQL) Check(ctx context.Context, tx *sql.Tx, resource string, fence uint64) error {
	if g.err != nil {
		return g.err
	}
	if err := checkSQLInput(resource, fence); err != nil {
		return err
	}
	err := g.advance(ctx, tx, resource, fence)
	observe(g.observer, "SQL", resource, fence, err)
	return err
}

// advance is Check after its input is checked.
func (g *SQL) advance(ctx context.Context, tx *sql.Tx, resource string, fence uint64) error {
	upsert := strings.ReplaceAll(g.dialect.upsert, "{{table}}", g.table)
	bound := int64(math.MaxInt64)
	if g.maxJump > 0 && g.maxJump < math.MaxInt64 {
		bound = int64(g.maxJump)
	}
	if _, err := tx.ExecContext(ctx, upsert, resource, int64(fence), bound); err != nil {
		return fmt.Errorf("fence: recording fence %d for %q in table %s: %w", fence, resource, g.table, err)
	}
	// The row is ours until tx ends; a locking read sees its newest value
	// even under REPEATABLE READ.
	query := "SELECT resource, fence FROM " + g.table + " WHERE resource = " + g.dialect.placeholder(1) + g.dialect.lockSuffix
	var (
		stored string
		newest int64
	)
	if err := tx.QueryRowContext(ctx, query, resource).Scan(&stored, &newest); err != nil {
		return fmt.Errorf("fence: reading the fence of %q in table %s: %w", resource, g.table, err)
	}
	// A column whose collation compares other names equal (trailing
	// blanks, case) would share one fence among them: a current holder
	// of one refused as stale, or a stale one accepted.
	if stored != resource {
		return fmt.Errorf("fence: table %s keeps the fence of %q in the row of %q: its resource column compares them equal, so they would share a fence: "+
			"give the column a type that compares names byte for byte, as Schema's does (%s)", g.table, resource, stored, g.dialect.column)
	}
	switch {
	case uint64(newest) > fence:
		return &StaleError{Resource: resource, Fence: fence, Newest: uint64(newest)}
	case uint64(newest) < fence: // the upsert kept the row: too high
		return &TooHighError{Resource: resource, Fence: fence, Newest: uint64(newest), MaxJump: g.maxJump}
	}
	return nil
}

// WriteFenced runs write in a new transaction of db, after Check(ctx, tx,
// resource, fence), and commits it if write returns nil. If the fence is
// stale it returns a *StaleError without calling write; if write returns
// an error, it returns that error. Either way nothing is written.
//
// The check of the fence and the writes it guards commit together, or not
// at all, in the database that holds the data: this is what a lock
// service alone cannot give.
func (g *SQL) WriteFenced(ctx context.Context, db *sql.DB, resource string, fence uint64, write func(ctx context.Context, tx *sql.Tx) error) error {
	return g.writeFenced(ctx, db, resource, fence, "", write)
}

// writeFenced is WriteFenced, with first, if not "", run first in the
// transaction.
func (g *SQL) writeFenced(ctx context.Context, db *sql.DB, resource string, fence uint64, first string, write func(ctx context.Context, tx *sql.Tx) error) error {
	if g.err != nil {
		return g.err
	}
	if err := checkSQLInput(resource, fence); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fence: beginning a fenced write to %q: %w", resource, err)
	}
	defer tx.Rollback() // after a Commit, it does nothing
	if first != "" {
		if _, err := tx.ExecContext(ctx, first); err != nil {
			return fmt.Errorf("fence: a fenced write to %q: %w", resource, err)
		}
	}
	err = g.advance(ctx, tx, resource, fence)
	observe(g.observer, "SQL", resource, fence, err)
	if err != nil {
		return err
	}
	if err := write(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fence: committing a fenced write to %q: %w", resource, err)
	}
	return nil
}

// Store returns the guard as a Store for Handler, on database db: its
// Advance records a fence in a transaction of its own.
//
// The resource a Store guards lives outside the database, so a fence the
// database loses after it acknowledged it (a commit not yet on disk when
// the server crashed) would let a stale write through. On PostgreSQL,
// Advance asks for a synchronous commit (synchronous_commit on, for its
// transaction), whatever the session's or server's default. On MySQL and
// MariaDB, which cannot ask per transaction, the Store's first call reads
// innodb_flush_log_at_trx_commit, and every call fails with an error
// matching ErrNotPersistent unless it is 1 (or unless the guard was made
// with AcceptFenceLoss). A server with fsync off (PostgreSQL) or a
// database file on a disk that lies about its flushes loses fences in a
// crash of its machine, as it loses any committed data: not checked.
func (g *SQL) Store(db *sql.DB) Store { return &sqlStore{g: g, db: db} }

// sqlStore is an SQL guard as a Store.
type sqlStore struct {
	g  *SQL
	db *sql.DB

	mu      sync.Mutex
	checked bool  // the server's durability has been read
	verdict error // nil if every commit is on disk when acknowledged
}

func (s *sqlStore) Advance(ctx context.Context, resource string, fence uint64) error {
	if err := s.checkDurable(ctx); err != nil {
		return err
	}
	return s.g.writeFenced(ctx, s.db, resource, fence, s.g.dialect.syncCommit, func(context.Context, *sql.Tx) error { return nil })
}

// checkDurable returns nil if the server puts every commit on disk before
// it answers, as far as a Store can tell, or ErrNotPersistent; it reads
// the server's setting once. A failure to read it is returned, not kept.
func (s *sqlStore) checkDurable(ctx context.Context) error {
	if s.g.acceptLoss || s.g.dialect.durable == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.checked {
		return s.verdict
	}
	var durable bool
	if err := s.db.QueryRowContext(ctx, s.g.dialect.durable).Scan(&durable); err != nil {
		return fmt.Errorf("fence: reading whether the %s server flushes every commit to disk: %w", s.g.dialect, err)
	}
	s.checked = true
	if !durable {
		s.verdict = fmt.Errorf("%w: innodb_flush_log_at_trx_commit is not 1, so a commit reaches the disk after the server acknowledged it, "+
			"and a fence acknowledged then can be lost in a crash; set innodb_flush_log_at_trx_commit=1 in the server's configuration, or make the guard with fence.AcceptFenceLoss() to take the risk",
			ErrNotPersistent)
	}
	return s.verdict
}

// checkSQLInput is checkInput for an SQL guard, which also refuses a NUL
// byte: PostgreSQL's text cannot hold one.
func checkSQLInput(resource string, fence uint64) error {
	if strings.IndexByte(resource, 0) >= 0 {
		return badInput{fmt.Sprintf("fence: resource name %q holds a NUL byte, which SQL text cannot", resource)}
	}
	return checkInput(resource, fence, maxSQLResource)
}
