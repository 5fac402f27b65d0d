package fence_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/testenv"
)

// A Store guards a resource outside the database, so a fence it
// acknowledged must survive a crash of the server. With synchronous_commit
// off (here in the connection string; a server's, role's or database's
// default does the same) PostgreSQL acknowledges a commit before it is on
// disk, and a kill -9 right after loses it: before Store asked for a
// synchronous commit, a stale fence 50 was then admitted after an
// acknowledged 100 in 5 of 5 crashes.
func TestIntegrationSQLStoreSurvivesCrash(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	pg := testenv.StartPostgres(t)
	sep := "?"
	if strings.Contains(pg.URL(), "?") {
		sep = "&"
	}
	const rounds = 3
	for i := range rounds {
		db := openDB(t, "pgx", pg.URL()+sep+"synchronous_commit=off")
		g := fence.NewSQL(fence.Postgres, fence.WithTable(unique("fences")))
		if err := g.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		execSQL(t, db, "CHECKPOINT") // the table itself is on disk
		if err := g.Store(db).Advance(ctx, "r", 100); err != nil {
			t.Fatalf("round %d: Advance(100): %v", i, err)
		}
		if err := pg.Kill(); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if err := pg.Restart(); err != nil {
			t.Fatal(err)
		}
		after := openDB(t, "pgx", pg.URL())
		err := g.Store(after).Advance(ctx, "r", 50)
		if !errors.Is(err, fence.ErrStale) {
			t.Fatalf("round %d: after a kill -9, Advance(50) following an acknowledged 100 = %v; want ErrStale", i, err)
		}
	}
}

// On MySQL and MariaDB a Store refuses a server that does not flush every
// commit to disk (innodb_flush_log_at_trx_commit other than 1), unless the
// guard takes the risk.
func TestIntegrationSQLStoreRefusesLazyFlush(t *testing.T) {
	db := mariaDB(t)
	ctx := ctxFor(t, time.Minute)
	table := unique("fences")
	if err := fence.NewSQL(fence.MySQL, fence.WithTable(table)).Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	root := openDB(t, "mysql", mariaSrv.RootDSN())
	was := scalar(t, root, "SELECT @@GLOBAL.innodb_flush_log_at_trx_commit")
	t.Cleanup(func() { execSQL(t, root, "SET GLOBAL innodb_flush_log_at_trx_commit = ?", was) })
	for _, c := range []struct {
		flush  int
		accept bool
		want   error
	}{{0, false, fence.ErrNotPersistent}, {2, false, fence.ErrNotPersistent}, {0, true, nil}, {1, false, nil}} {
		execSQL(t, root, "SET GLOBAL innodb_flush_log_at_trx_commit = ?", c.flush)
		var opts []fence.Option
		if c.accept {
			opts = append(opts, fence.AcceptFenceLoss())
		}
		g := fence.NewSQL(fence.MySQL, append(opts, fence.WithTable(table))...)
		err := g.Store(db).Advance(ctx, unique("r"), 1)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("innodb_flush_log_at_trx_commit = %d, AcceptFenceLoss %v: Advance = %v; want %v", c.flush, c.accept, err, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), "innodb_flush_log_at_trx_commit") {
			t.Errorf("%q does not name the setting", err)
		}
	}
}
