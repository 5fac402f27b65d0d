package zklock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/zklock"
)

// Inspect reports at most 256 bytes of a holder's token, however large
// the data another client put in the holder's node (ZooKeeper sends a
// node's data whole, up to its jute.maxbuffer, 1 MB by default: what
// Inspect keeps and returns is cut).
func TestIntegrationInspectCapsValues(t *testing.T) {
	servers := []string{sharedZK(t).Addr()}
	ctx := ctxFor(t, time.Minute)
	c := connect(t, servers)
	p := uniquePath(t)
	held, err := c.NewMutex(p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	if _, err := admin(t, servers).Set(held.(*zklock.Lease).Path(), []byte(strings.Repeat("x", 1000000)), -1); err != nil {
		t.Fatal(err)
	}
	info, err := c.Inspect(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Holders) != 1 || len(info.Holders[0].Owner) > 300 {
		t.Errorf("Inspect of a holder whose node holds 1 MB: %+v; want one holder, its owner at most about 256 bytes", len(info.Holders))
	}
	if len(info.Holders) > 0 {
		t.Logf("owner %d bytes long", len(info.Holders[0].Owner))
	}
}
