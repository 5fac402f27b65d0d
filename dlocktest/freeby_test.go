package dlocktest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
)

// TestIntegrationFreeByJudgesTheHolder checks freeBy, ReleaseDuringRenewal's
// check that a lease whose Release got no answer leaves the lock free by
// its deadline, on a real server: a lock held past the deadline by
// another (a request of freeBy's own that landed late, on a stalled
// server, or a lease granted later) is waited out, not counted against
// the released lease (ReleaseDuringRenewal failed so on Redlock under
// load: "lock still held 3.7s past the Until"); the released lease's own
// key past the deadline still fails.
func TestIntegrationFreeByJudgesTheHolder(t *testing.T) {
	testenv.SkipIfShort(t, "needs redis-server")
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	client := func() *redislock.Client {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		c := redislock.New(goredisconn.New(rdb))
		t.Cleanup(func() { c.Close(); rdb.Close() })
		return c
	}
	const ttl = time.Second
	ctx := ctxFor(t, time.Minute)
	name := uniqueKey(t)
	adm := client()
	inspect := func(ctx context.Context) (dlock.Info, error) { return adm.Inspect(ctx, name) }
	l := client().NewMutex(name, redislock.WithTTL(ttl))

	t.Run("HeldByAnother", func(t *testing.T) {
		released := mustLock(t, ctx, l)
		if err := released.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		// Another holds the lock past the released lease's deadline,
		// until freeBy has seen it.
		other := mustLock(t, ctx, client().NewMutex(name, redislock.WithTTL(ttl)))
		var r record
		go func() {
			defer other.Release(context.WithoutCancel(ctx))
			for ctx.Err() == nil && len(r.get(&r.logs))+len(r.get(&r.errs)) == 0 {
				time.Sleep(10 * time.Millisecond)
			}
		}()
		freeBy(ctx, &r, l, ttl, time.Now(), released.Token(), inspect)
		if errs := r.get(&r.errs); len(errs) > 0 {
			t.Errorf("freeBy counted another's hold against the released lease: %q", errs)
		}
		if logs := r.get(&r.logs); len(logs) == 0 || !strings.Contains(logs[0], "not by that lease") || !strings.Contains(logs[0], other.Token()) {
			t.Errorf("freeBy logged %q; want that another (%s) held the lock", logs, other.Token())
		}
	})

	t.Run("HeldByTheReleasedLease", func(t *testing.T) {
		// The released lease's key, past its deadline, as a Release that
		// did not delete it and renewals that went on would leave it.
		kept := mustLock(t, ctx, l)
		defer kept.Release(context.WithoutCancel(ctx))
		var r record
		freeBy(ctx, &r, l, ttl, time.Now(), kept.Token(), inspect)
		if errs := r.get(&r.errs); len(errs) != 1 || !strings.Contains(errs[0], "by that lease") || !strings.Contains(errs[0], kept.Token()) {
			t.Errorf("freeBy reported %q; want one error naming the released lease %s", errs, kept.Token())
		}
	})
}

// A record keeps what freeBy reports.
type record struct {
	mu         sync.Mutex
	errs, logs []string
}

func (r *record) Errorf(format string, args ...any) { r.add(&r.errs, format, args) }
func (r *record) Logf(format string, args ...any)   { r.add(&r.logs, format, args) }

func (r *record) add(to *[]string, format string, args []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*to = append(*to, fmt.Sprintf(format, args...))
}

func (r *record) get(from *[]string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), *from...)
}
