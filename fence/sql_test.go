package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/fence"
)

// databases are the SQL databases under test; mariadb_test.go adds
// MariaDB.
var databases = []struct {
	name    string
	dialect fence.Dialect
	open    func(t testing.TB) *sql.DB
}{
	{"PostgreSQL", fence.Postgres, postgresDB},
	{"SQLite", fence.SQLite, sqliteDB},
}

// execSQL runs a statement on db and fails t on an error.
func execSQL(t testing.TB, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func scalar(t testing.TB, db *sql.DB, query string, args ...any) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRow(query, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return v
}

// A fenced write commits with the newest fence, and again with the same
// one; a lower fence is refused, and the writes of its transaction, made
// before or after the check, are not kept.
func TestIntegrationSQLWriteFenced(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			ctx := ctxFor(t, time.Minute)
			table, accounts := unique("fences"), unique("accounts")
			g := fence.NewSQL(d.dialect, fence.WithTable(table))
			if err := g.Migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
			if err := g.Migrate(ctx, db); err != nil {
				t.Fatalf("Migrate again: %v", err)
			}
			execSQL(t, db, "CREATE TABLE "+accounts+" (id varchar(10) PRIMARY KEY, balance int NOT NULL)")
			execSQL(t, db, "INSERT INTO "+accounts+" VALUES ('a', 0)")
			set := func(v int) func(context.Context, *sql.Tx) error {
				return func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET balance = %d WHERE id = 'a'", accounts, v))
					return err
				}
			}
			balance := func() int64 { return scalar(t, db, "SELECT balance FROM "+accounts+" WHERE id = 'a'") }
			for _, step := range []struct {
				fence uint64
				v     int
				stale bool
			}{{10, 1, false}, {10, 2, false}, {11, 3, false}, {10, 4, true}, {1, 5, true}, {11, 6, false}} {
				err := g.WriteFenced(ctx, db, "account/a", step.fence, set(step.v))
				var se *fence.StaleError
				if step.stale != errors.Is(err, fence.ErrStale) || !step.stale && err != nil {
					t.Fatalf("write of %d with fence %d: %v; want stale: %v", step.v, step.fence, err, step.stale)
				}
				if step.stale && (!errors.As(err, &se) || se.Newest != 11 || se.Fence != step.fence || se.Resource != "account/a") {
					t.Fatalf("stale write with fence %d: %#v; want Newest 11", step.fence, se)
				}
			}
			if got := balance(); got != 6 {
				t.Fatalf("balance %d; want 6, the last write with a current fence", got)
			}

			// The caller's transaction, with a write before the check.
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := set(99)(ctx, tx); err != nil {
				t.Fatal(err)
			}
			err = g.Check(ctx, tx, "account/a", 10)
			t.Logf("stale: %v", err)
			if !errors.Is(err, fence.ErrStale) {
				t.Fatalf("Check with fence 10 after 11: %v; want ErrStale", err)
			}
			tx.Rollback()
			if got := balance(); got != 6 {
				t.Fatalf("balance %d after a stale transaction; want 6", got)
			}
			if got := scalar(t, db, "SELECT fence FROM "+table+" WHERE resource = 'account/a'"); got != 11 {
				t.Fatalf("recorded fence %d; want 11", got)
			}

			// The write's own error comes back, and nothing is kept.
			boom := errors.New("boom")
			err = g.WriteFenced(ctx, db, "account/a", 12, func(ctx context.Context, tx *sql.Tx) error {
				if err := set(12)(ctx, tx); err != nil {
					return err
				}
				return boom
			})
			if err != boom || balance() != 6 {
				t.Fatalf("a write that failed: %v, balance %d; want boom and 6", err, balance())
			}
			if got := scalar(t, db, "SELECT fence FROM "+table+" WHERE resource = 'account/a'"); got != 11 {
				t.Fatalf("recorded fence %d after a failed write; want 11", got)
			}
		})
	}
}

// Writers with fences 1 to n race, each in its own transaction that
// holds the check across a read-modify-write: the fences accepted are
// increasing in commit order, and every write accepted after fence f was
// refused to the writers below f. The table's final fence is n's.
func TestIntegrationSQLConcurrentChecks(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			ctx := ctxFor(t, time.Minute)
			table, log := unique("fences"), unique("log")
			g := fence.NewSQL(d.dialect, fence.WithTable(table))
			if err := g.Migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
			execSQL(t, db, "CREATE TABLE "+log+" (seq int PRIMARY KEY, fence bigint NOT NULL)")
			const n = 24
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for f := range uint64(n) {
				wg.Go(func() {
					err := g.WriteFenced(ctx, db, "r", f+1, func(ctx context.Context, tx *sql.Tx) error {
						var seq int64
						if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+log).Scan(&seq); err != nil {
							return err
						}
						_, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s VALUES (%d, %d)", log, seq, f+1))
						return err
					})
					if err != nil && !errors.Is(err, fence.ErrStale) {
						errs <- fmt.Errorf("fence %d: %w", f+1, err)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			rows, err := db.Query("SELECT fence FROM " + log + " ORDER BY seq")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var accepted []int64
			for rows.Next() {
				var f int64
				rows.Scan(&f)
				accepted = append(accepted, f)
			}
			for i := 1; i < len(accepted); i++ {
				if accepted[i] <= accepted[i-1] {
					t.Fatalf("writes accepted in the order of fences %v: %d after %d", accepted, accepted[i], accepted[i-1])
				}
			}
			if len(accepted) == 0 || scalar(t, db, "SELECT fence FROM "+table+" WHERE resource = 'r'") != accepted[len(accepted)-1] {
				t.Fatalf("accepted %v; the recorded fence is not the last of them", accepted)
			}
			t.Logf("%d of %d writers accepted, in order: %v", len(accepted), n, accepted)
		})
	}
}

// A Row carries its own fence: an update with a lower fence changes
// nothing, an equal or higher one passes, a missing row says so.
func TestIntegrationSQLRow(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			ctx := ctxFor(t, time.Minute)
			items := unique("items")
			execSQL(t, db, "CREATE TABLE "+items+" (id varchar(10) PRIMARY KEY, qty int NOT NULL, fence bigint NOT NULL DEFAULT 0)")
			execSQL(t, db, "INSERT INTO "+items+" (id, qty) VALUES ('x', 0)")
			row := fence.Row{Dialect: d.dialect, Table: items}
			set := "qty = ?"
			if d.dialect == fence.Postgres {
				set = "qty = $1"
			}
			for _, step := range []struct {
				fence uint64
				qty   int
				stale bool
			}{{5, 1, false}, {5, 1, false}, {5, 2, false}, {7, 3, false}, {6, 4, true}} {
				err := row.Update(ctx, db, "x", step.fence, set, step.qty)
				if step.stale != errors.Is(err, fence.ErrStale) || !step.stale && err != nil {
					t.Fatalf("update of %d with fence %d: %v; want stale: %v", step.qty, step.fence, err, step.stale)
				}
			}
			if got := scalar(t, db, "SELECT qty FROM "+items+" WHERE id = 'x'"); got != 3 {
				t.Fatalf("qty %d; want 3", got)
			}
			if err := row.Update(ctx, db, "nope", 9, set, 1); !errors.Is(err, fence.ErrNoRow) {
				t.Fatalf("update of a missing row: %v; want ErrNoRow", err)
			}
		})
	}
}

// Bad input is refused before any statement, with an error naming it.
func TestSQLInput(t *testing.T) {
	db := sqliteDB(t)
	ctx := ctxFor(t, 10*time.Second)
	noop := func(context.Context, *sql.Tx) error { return nil }
	for _, c := range []struct {
		g        *fence.SQL
		resource string
		fence    uint64
	}{
		{fence.NewSQL(fence.SQLite, fence.WithTable("x; DROP TABLE y")), "r", 1},
		{fence.NewSQL(fence.Dialect{}), "r", 1},
		{fence.NewSQL(fence.SQLite), "", 1},
		{fence.NewSQL(fence.SQLite), string(make([]byte, 256)), 1},
		{fence.NewSQL(fence.SQLite), "r", 0},
		{fence.NewSQL(fence.SQLite), "r", 1 << 63},
	} {
		err := c.g.WriteFenced(ctx, db, c.resource, c.fence, noop)
		if err == nil || errors.Is(err, fence.ErrStale) {
			t.Errorf("WriteFenced(%.20q, %d): %v; want an input error", c.resource, c.fence, err)
		}
	}
}
