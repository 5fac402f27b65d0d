package dlockprom_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlockprom"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopAll()
	os.Exit(code)
}

// The metrics of real locks on a real redis-server: a TryLock that fails,
// a Lock that waits, the releases, and a loss.
func TestIntegrationRedislock(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	metrics := dlockprom.New()
	client := func() *redislock.Client {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		c := redislock.New(goredisconn.New(rdb), redislock.WithObserver(metrics))
		t.Cleanup(func() { c.Close(); rdb.Close() })
		return c
	}
	ttl := redislock.WithTTL(900 * time.Millisecond) // the loss is noticed within TTL/3
	a, b := client().NewMutex("orders", ttl), client().NewMutex("orders", ttl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first, err := a.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("TryLock: %v", err)
	}
	got := make(chan dlock.Lease, 1)
	go func() {
		l, err := b.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	for deadline := time.Now().Add(10 * time.Second); value(t, metrics, "dlock_waiting", orders()) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("dlock_waiting never reached 1")
		}
	}
	if h := value(t, metrics, "dlock_holders", orders()); h != 1 {
		t.Errorf("holders = %v while one holds and one waits; want 1", h)
	}
	first.Release(ctx)
	second := <-got
	if second == nil {
		t.FailNow()
	}
	if w := value(t, metrics, "dlock_waiting", orders()); w != 0 {
		t.Errorf("waiting = %v after the waiter got the lock; want 0", w)
	}
	srv.Do("DEL", "dlock:{orders}") // behind the holder's back
	select {
	case <-second.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the loss was not noticed")
	}
	for deadline := time.Now().Add(5 * time.Second); value(t, metrics, "dlock_holders", orders()) != 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond) // the event follows Done
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"dlock_acquisitions_total", orders("result", "acquired"), 2},
		{"dlock_acquisitions_total", orders("result", "not_obtained"), 1},
		{"dlock_wait_seconds", orders(), 2},
		{"dlock_holders", orders(), 0},
		{"dlock_waiting", orders(), 0},
		{"dlock_losses_total", orders("cause", "taken_over"), 1},
		{"dlock_hold_seconds", orders(), 2},
	} {
		if got := value(t, metrics, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v; want %v", c.name, c.labels, got, c.want)
		}
	}
}
