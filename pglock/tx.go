package pglock

import (
	"context"

	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// beginTx begins the transaction in which pglock runs each of its round
// trips: READ COMMITTED, whatever default_transaction_isolation says, so
// that an acquire that meets a grant in flight waits for it and reads the
// row it committed, where REPEATABLE READ or SERIALIZABLE would fail with
// a serialization failure (40001); read-only if
// default_transaction_read_only says so, which pglock does not override
// (see describe).
const beginTx = "BEGIN ISOLATION LEVEL READ COMMITTED"

// settings makes the transaction's COMMIT wait for its WAL to reach the
// disk when synchronous_commit is off (for the server, the database, the
// role or the session), as it does by default: an asynchronous commit is
// lost if the server crashes within a few wal_writer_delay of it, a crash
// of any one backend included, which the postmaster recovers from without
// restarting, so that no restart window sees it. A lost grant is a second
// holder while the first one's lease is valid. Any other setting keeps
// the local flush, and what it asks of synchronous standbys.
//
// It also bounds the transaction's waits for a row's lock to
// dblease.LockWait (1s), or to half of statement_timeout if that is
// shorter, unless lock_timeout is shorter already: a statement that meets
// a lock's row held by another transaction past it fails with
// lock_not_available (55P03), and an attempt so failing found the lock
// held, where waiting on would have outlasted its attempt timeout, or
// been cancelled by statement_timeout (57014), and looked like a database
// that does not answer.
const settings = "SELECT CASE WHEN current_setting('synchronous_commit') = 'off' THEN set_config('synchronous_commit', 'local', true) END, " +
	"CASE WHEN current_setting('lock_timeout')::interval NOT BETWEEN interval '1 microsecond' AND w.wait " +
	"THEN set_config('lock_timeout', greatest(1, floor(extract(epoch FROM w.wait) * 1000))::bigint::text, true) END " +
	"FROM (SELECT CASE WHEN current_setting('statement_timeout')::interval > interval '0' " +
	"THEN least(interval '1s', current_setting('statement_timeout')::interval / 2) ELSE interval '1s' END AS wait) w"

// send sends the statements of b through via in one round trip, in a
// transaction of their own (see beginTx) that commits after the last,
// durably, and waits at most LockWait for a row's lock (see settings).
// Read their results, in order, from the BatchResults it returns, and
// Close it, which reports a failed COMMIT. The transaction spans no round
// trip, so idle_in_transaction_session_timeout never ends it.
//
// If a statement fails, the transaction is left aborted on its
// connection: the pool closes such a connection when it is given back.
func send(ctx context.Context, via sender, b *pgx.Batch) pgx.BatchResults {
	tx := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+3)}
	tx.Queue(beginTx)
	tx.Queue(settings)
	tx.QueuedQueries = append(tx.QueuedQueries, b.QueuedQueries...)
	tx.Queue("COMMIT")
	br := via.SendBatch(ctx, tx)
	// BEGIN and settings: an error stays with br, for the next read and
	// Close.
	br.Exec()
	br.Exec()
	return br
}

// exec runs one statement that returns no rows through via, as send
// does, and returns its command tag.
func exec(ctx context.Context, via sender, sql string, args ...any) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := send(ctx, via, b)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// queryRow runs one statement through via, as send does, and scans its
// first row into dest. It returns pgx.ErrNoRows if there is none.
func queryRow(ctx context.Context, via sender, dest []any, sql string, args ...any) error {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := send(ctx, via, b)
	err := br.QueryRow().Scan(dest...)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// query runs one statement through via, as send does, and calls each with
// each of its rows, scanned into dest.
func query(ctx context.Context, via sender, dest []any, each func() error, sql string, args ...any) error {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := send(ctx, via, b)
	rows, err := br.Query()
	if err == nil {
		_, err = pgx.ForEachRow(rows, dest, each)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// again runs f again while it fails with a transient error (see
// dblease.Again).
func again(ctx context.Context, f func() error) error { return dblease.Again(ctx, transient, f) }
