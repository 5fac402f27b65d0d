package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/fence"
)

// A stale holder (fence 10) reads inside a transaction, at each isolation
// level (SQLite has one); a newer holder then writes with fence 20 and commits; the stale
// holder's Row.Update, or Check, must not report success: its write did
// not land, and the row (or the table of fences) keeps the newer holder's
// values. MariaDB's REPEATABLE READ reads from the transaction's snapshot,
// which does not show the newer holder's fence.
func TestIntegrationSQLStaleTransaction(t *testing.T) {
	for _, d := range databases {
		levels := []sql.IsolationLevel{sql.LevelReadUncommitted, sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable}
		if d.dialect == fence.SQLite {
			levels = []sql.IsolationLevel{sql.LevelDefault} // SQLite's one: serializable
		}
		for _, level := range levels {
			t.Run(d.name+"/"+strings.ReplaceAll(level.String(), " ", "-"), func(t *testing.T) {
				db := d.open(t)
				ctx := ctxFor(t, time.Minute)
				ph := func(n string) string {
					if d.dialect == fence.Postgres {
						return "$" + n
					}
					return "?"
				}
				// refused says whether err is the refusal of a write that did not
				// land: a StaleError, or, where the database refuses a
				// transaction that would write over a row changed since it
				// began, its serialization failure (PostgreSQL's SQLSTATE
				// 40001, SQLite's SQLITE_BUSY_SNAPSHOT).
				refused := func(err error) bool {
					switch {
					case errors.Is(err, fence.ErrStale):
						return true
					case err == nil:
						return false
					case d.dialect == fence.Postgres:
						return level >= sql.LevelRepeatableRead && strings.Contains(err.Error(), "(SQLSTATE 40001)")
					case d.dialect == fence.SQLite:
						return strings.Contains(err.Error(), "(517)")
					}
					return false
				}
				begin := func() *sql.Tx {
					tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: level})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { tx.Rollback() })
					return tx
				}

				// Row.
				items := unique("items")
				execSQL(t, db, "CREATE TABLE "+items+" (id varchar(10) PRIMARY KEY, qty int NOT NULL, fence bigint NOT NULL DEFAULT 0)")
				execSQL(t, db, "INSERT INTO "+items+" (id, qty, fence) VALUES ('x', 0, 5), ('y', 0, 5)")
				row := fence.Row{Dialect: d.dialect, Table: items}
				set := "qty = " + ph("1")
				stale := begin()
				// The stale holder reads the row it will write; at
				// SERIALIZABLE, where MariaDB's read would lock the row until
				// the transaction ends, another row.
				read := "x"
				if level == sql.LevelSerializable {
					read = "y"
				}
				var qty int
				if err := stale.QueryRowContext(ctx, "SELECT qty FROM "+items+" WHERE id = "+ph("1"), read).Scan(&qty); err != nil {
					t.Fatal(err)
				}
				if err := row.Update(ctx, db, "x", 20, set, 2); err != nil {
					t.Fatalf("the newer holder's update: %v", err)
				}
				err := row.Update(ctx, stale, "x", 10, set, 1)
				if err == nil {
					err = stale.Commit()
				}
				t.Logf("Row.Update: %v", err)
				if !refused(err) {
					t.Errorf("the stale holder's Row.Update (or its commit): %v; want a StaleError", err)
				}
				stale.Rollback()
				if q, f := scalar(t, db, "SELECT qty FROM "+items+" WHERE id = 'x'"), scalar(t, db, "SELECT fence FROM "+items+" WHERE id = 'x'"); q != 2 || f != 20 {
					t.Errorf("the row holds qty %d, fence %d; want the newer holder's 2 and 20", q, f)
				}

				// SQL.Check.
				g := fence.NewSQL(d.dialect, fence.WithTable(unique("fences")))
				if err := g.Migrate(ctx, db); err != nil {
					t.Fatal(err)
				}
				if err := g.WriteFenced(ctx, db, "r", 5, func(context.Context, *sql.Tx) error { return nil }); err != nil {
					t.Fatal(err)
				}
				stale = begin()
				if err := stale.QueryRowContext(ctx, "SELECT qty FROM "+items+" WHERE id = 'y'").Scan(&qty); err != nil {
					t.Fatal(err)
				}
				if err := g.WriteFenced(ctx, db, "r", 20, func(context.Context, *sql.Tx) error { return nil }); err != nil {
					t.Fatalf("the newer holder's write: %v", err)
				}
				err = g.Check(ctx, stale, "r", 10)
				if err == nil {
					err = stale.Commit()
				}
				t.Logf("Check: %v", err)
				if !refused(err) {
					t.Errorf("the stale holder's Check (or its commit): %v; want a StaleError", err)
				}
			})
		}
	}
}
