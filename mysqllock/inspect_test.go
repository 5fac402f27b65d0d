package mysqllock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/mysqllock"
)

func TestIntegrationInspectAndForceUnlock(t *testing.T) {
	srv := sharedDB(t)
	ctx := ctxFor(t, time.Minute)
	c := newClient(t, srv.DSN())
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			key := unique("inspect")
			if info, err := c.Inspect(ctx, key); err != nil || info.Kind != dlock.KindFree || info.Held() || info.Fence != 0 {
				t.Errorf("Inspect of a name never locked = %+v, %v; want free, fence 0", info, err)
			}
			held, err := md.newLocker(newClient(t, srv.DSN()), key, mysqllock.WithTTL(2*time.Second)).TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			info, err := c.Inspect(ctx, key)
			if err != nil || info.Kind != dlock.KindMutex || len(info.Holders) != 1 || info.Fence != held.Fence() ||
				info.Holders[0].Owner != held.Token() || info.TTL <= 0 || info.TTL > 2*time.Second {
				t.Errorf("Inspect of a held lock = %+v, %v; want held by %s with fence %d and up to 2s left", info, err, held.Token(), held.Fence())
			}
			if (info.Holders[0].Where != "") != (md.name == "session") {
				t.Errorf("Where = %q in %s mode", info.Holders[0].Where, md.name)
			}
			was, err := c.ForceUnlock(ctx, key)
			if err != nil || !was {
				t.Fatalf("ForceUnlock = %v, %v; want true", was, err)
			}
			if md.name == "session" { // its connection was killed
				select {
				case <-held.Done():
					if !errors.Is(held.Err(), mysqllock.ErrSessionLost) {
						t.Errorf("Err = %v; want ErrSessionLost", held.Err())
					}
				case <-time.After(200*time.Millisecond + dlockSlack):
					t.Error("the session holder did not learn of ForceUnlock")
				}
			} else {
				if err := held.Refresh(ctx); !errors.Is(err, dlock.ErrTakenOver) {
					t.Errorf("Refresh after ForceUnlock: %v; want ErrTakenOver", err)
				}
			}
			if info, err := c.Inspect(ctx, key); err != nil || info.Held() || info.Fence != held.Fence() {
				t.Errorf("Inspect after ForceUnlock = %+v, %v; want free with the last fence", info, err)
			}
			if was, err := c.ForceUnlock(ctx, key); err != nil || was {
				t.Errorf("second ForceUnlock = %v, %v; want false", was, err)
			}
		})
	}
}
