package redislock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/redis/go-redis/v9"
)

// sentBytes returns how many bytes the server has sent its clients.
func sentBytes(t testing.TB, rdb redis.UniversalClient) int64 {
	t.Helper()
	s, err := rdb.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_net_output_bytes:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("INFO stats has no total_net_output_bytes")
	return 0
}

// Inspect reads at most a few hundred bytes of every value it reports,
// however large the values that another writer of the server put in a
// lock's keys: a reentrant lock's owner field of 1 MB, 16 permits and 16
// readers of 128 KB each. The server sends a reply of a few KB, not the
// megabytes. (At 5 MB and 16 of 1 MB, the server's script took more than
// AttemptTimeout on a loaded two-core machine: "i/o timeout".)
func TestIntegrationInspectCapsValues(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	admin := d.admin(t)
	c := newClient(t, d, goRedis)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	big := func(n int, c byte) string { return strings.Repeat(string(c), n) }
	until := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	for _, k := range []struct {
		kind  string
		take  func(name string) dlock.Locker
		plant func(name string) error
	}{
		{"ReentrantMutex", func(n string) dlock.Locker { return c.NewReentrantMutex(n) }, func(n string) error {
			return admin.HSet(ctx, lockKey(n), "o:"+big(1<<20, 'o'), "1").Err()
		}},
		{"Semaphore", func(n string) dlock.Locker { return c.NewSemaphore(n, 100) }, func(n string) error {
			for i := range 16 {
				if err := admin.Do(ctx, "ZADD", lockKey(n)+":permits", until, big(128<<10, byte('a'+i))).Err(); err != nil {
					return err
				}
			}
			return nil
		}},
		{"RWMutex.read", func(n string) dlock.Locker { return c.NewRWMutex(n).Reader() }, func(n string) error {
			for i := range 16 {
				if err := admin.Do(ctx, "ZADD", lockKey(n)+":readers", until, big(128<<10, byte('a'+i))).Err(); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		t.Run(k.kind, func(t *testing.T) {
			name := "caps-" + k.kind
			l, err := k.take(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(ctx)
			if err := k.plant(name); err != nil {
				t.Fatal(err)
			}
			before := sentBytes(t, admin)
			info, err := c.Inspect(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			sent := sentBytes(t, admin) - before
			total := 0
			for _, h := range info.Holders {
				total += len(h.Owner) + len(h.Label)
				if len(h.Owner) > 300 {
					t.Errorf("a holder's owner is %d bytes long; want at most about 256", len(h.Owner))
				}
			}
			t.Logf("%s: %d holders, %d bytes of owners and labels, %d bytes sent by the server", k.kind, len(info.Holders), total, sent)
			if sent > 64<<10 {
				t.Errorf("the server sent %d bytes for one Inspect; want a few KB", sent)
			}
			admin.Del(ctx, lockKey(name), lockKey(name)+":permits", lockKey(name)+":readers")
		})
	}
}
