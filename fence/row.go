package fence

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/dlock-go/dlock"
)

// A Querier runs statements: a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// A Row guards the rows of a table that carry their own fence, in a
// column beside the data: the variant that needs no table of fences. Its
// Update is one statement,
//
//	UPDATE table SET <set>, fence = <fence> WHERE id = <id> AND fence <= <fence>
//
// which changes the row only if the fence is not stale, and records it in
// the same write. The fence column is a bigint, NOT NULL, that starts at 0
// in a new row. The zero Row is not usable: set Dialect and Table.
type Row struct {
	Dialect Dialect
	Table   string // the table, which must need no quoting
	Key     string // the key column; "id" if empty
	Fence   string // the fence column; "fence" if empty

	// Observer, if not nil, is told of each update accepted or refused,
	// as with WithObserver, under the resource name "Table/id".
	Observer dlock.Observer
}

// ErrNoRow is returned by Row.Update when no row has the key.
var ErrNoRow = errors.New("fence: no row with that key")

// Update sets, in the row whose key is id, the columns of set, an SQL
// assignment list with placeholders ("balance = ?, note = ?" in MySQL and
// SQLite, "balance = $1, note = $2" in PostgreSQL) whose values are args,
// and the fence column to fence, unless the row's fence is higher: then it
// changes nothing and returns a *StaleError, matching ErrStale. An equal
// fence passes. It returns an error matching ErrNoRow if no row has the
// key.
//
// q may be the caller's transaction, at any isolation level, or the
// database itself: the check and the write are one statement, which reads
// the newest row, and Update returns nil only if it wrote. Given the
// *sql.DB of MySQL or MariaDB, Update runs in a transaction of its own,
// which it commits: a session that does not autocommit (autocommit=0, in
// the DSN or the server's default) would otherwise keep the write
// uncommitted, and the row locked, on a connection returned to the pool.
// Given a *sql.Conn or a *sql.Tx, committing is the caller's. When it wrote nothing because
// the row's fence is higher, it says so with a *StaleError even where the
// transaction's reads see an older snapshot (MySQL's REPEATABLE READ): it
// reads the fence again with a locking read. A transaction that reads a
// snapshot can also be refused by the database itself, if a later holder
// changed the row after the snapshot was taken: PostgreSQL, at REPEATABLE
// READ or SERIALIZABLE, fails the update with a serialization failure
// (SQLSTATE 40001), and SQLite fails a transaction that read before
// another connection wrote with SQLITE_BUSY_SNAPSHOT. Nothing is written
// then either; the caller rolls back, and a retry in a new transaction is
// refused as stale or writes.
func (r Row) Update(ctx context.Context, q Querier, id any, fence uint64, set string, args ...any) error {
	if r.Dialect.upsert == "" {
		return errors.New("fence: Row needs a Dialect: fence.Postgres, fence.MySQL or fence.SQLite")
	}
	if !identifier.MatchString(r.Table) {
		return fmt.Errorf("fence: Row's Table %q is not a table name that needs no quoting (letters, digits and underscores, with at most one dot)", r.Table)
	}
	key, col := cmp.Or(r.Key, "id"), cmp.Or(r.Fence, "fence")
	for _, c := range []string{key, col} {
		if !identifier.MatchString(c) || strings.Contains(c, ".") {
			return fmt.Errorf("fence: Row column %q is not letters, digits and underscores", c)
		}
	}
	if strings.TrimSpace(set) == "" {
		return errors.New("fence: Row.Update needs the columns to set")
	}
	resource := r.Table + "/" + fmt.Sprint(id)
	if err := checkInput(resource, fence, maxResource); err != nil {
		return err
	}
	n := len(args)
	ph := r.Dialect.placeholder
	query := fmt.Sprintf("UPDATE %s SET %s, %s = %s WHERE %s = %s AND %s <= %s",
		r.Table, set, col, ph(n+1), key, ph(n+2), col, ph(n+3))
	args = append(args, int64(fence), id, int64(fence))
	var err error
	if db, ok := q.(*sql.DB); ok && r.Dialect.mayNotAutocommit {
		err = r.updateTx(ctx, db, query, args, id, resource, fence)
	} else {
		err = r.update(ctx, q, query, args, id, resource, fence)
	}
	observe(r.Observer, "Row", resource, fence, err)
	return err
}

// updateTx is update in a transaction of db's that it commits: a session
// that does not autocommit (MySQL's autocommit=0) would otherwise keep
// the write, and the locks of the update and of classify's read,
// uncommitted on a connection returned to the pool.
func (r Row) updateTx(ctx context.Context, db *sql.DB, query string, args []any, id any, resource string, fence uint64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fence: beginning the update of %s: %w", resource, err)
	}
	defer tx.Rollback() // after a Commit, it does nothing
	if err := r.update(ctx, tx, query, args, id, resource, fence); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fence: committing the update of %s: %w", resource, err)
	}
	return nil
}

// update runs the update query with args on q, and returns nil if it
// wrote.
func (r Row) update(ctx context.Context, q Querier, query string, args []any, id any, resource string, fence uint64) error {
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("fence: updating %s: %w", resource, err)
	}
	if changed, err := res.RowsAffected(); err == nil && changed > 0 {
		return nil
	}
	return r.classify(ctx, q, id, resource, fence)
}

// classify returns the error of an update of the row id with fence that
// changed nothing.
func (r Row) classify(ctx context.Context, q Querier, id any, resource string, fence uint64) error {
	key, col, ph := cmp.Or(r.Key, "id"), cmp.Or(r.Fence, "fence"), r.Dialect.placeholder
	// Nothing changed: the fence is stale, or no row has the key, or (in
	// MySQL, which counts changed rows only) the row already held these
	// values and this fence. The read must be a locking one: in MySQL's
	// REPEATABLE READ a plain SELECT reads the transaction's snapshot,
	// which need not show the fence of a later holder that the UPDATE,
	// reading the newest row, saw.
	var newest int64
	err := q.QueryRowContext(ctx, "SELECT "+col+" FROM "+r.Table+" WHERE "+key+" = "+ph(1)+r.Dialect.lockSuffix, id).Scan(&newest)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: %s", ErrNoRow, resource)
	case err != nil:
		return fmt.Errorf("fence: reading the fence of %s: %w", resource, err)
	case uint64(newest) > fence:
		return &StaleError{Resource: resource, Fence: fence, Newest: uint64(newest)}
	}
	return nil
}
