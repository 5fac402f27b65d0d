package mysqllock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/mysqllock"
)

// Inspect reads at most 256 bytes of a holder's token, however long the
// token another writer of the table put in the lock's row: a table whose
// token column was widened by hand (the schema's holds 255 bytes) with a
// 5 MB token in it is not sent in full.
func TestIntegrationInspectCapsToken(t *testing.T) {
	srv := sharedDB(t)
	ctx := ctxFor(t, time.Minute)
	table := unique("caps")
	c := newClient(t, srv.DSN(), mysqllock.WithTable(table))
	if err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	admin(t, srv, "ALTER TABLE "+table+" MODIFY token LONGBLOB NOT NULL")
	name := unique("caps")
	held, err := c.NewMutex(name, mysqllock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	admin(t, srv, "UPDATE "+table+" SET token = REPEAT('x', 5000000) WHERE name = ?", name)
	info, err := c.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Holders) != 1 || len(info.Holders[0].Owner) > 300 {
		n := 0
		if len(info.Holders) > 0 {
			n = len(info.Holders[0].Owner)
		}
		t.Errorf("Inspect of a row with a 5 MB token: %d holders, the first's owner %d bytes long; want one, at most about 256", len(info.Holders), n)
	}
	admin(t, srv, "DROP TABLE "+table)
}
