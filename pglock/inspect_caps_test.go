package pglock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/pglock"
)

// Inspect reads at most 256 characters of a holder's token, however long
// the token another writer of the table put in the lock's row: a 5 MB
// token is not sent by the server in full.
func TestIntegrationInspectCapsToken(t *testing.T) {
	url := sharedDB(t).URL()
	ctx := ctxFor(t, time.Minute)
	c := newClient(t, url)
	name := unique("caps")
	held, err := c.NewMutex(name, pglock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	admin(t, url, "UPDATE "+pglock.DefaultTable+" SET token = repeat('x', 5000000) WHERE name = $1", name)
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
}
