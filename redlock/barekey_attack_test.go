package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redlock"
)

// Two MultiLocks over the bare key and dlock's layout of one name on the
// same Redlock nodes, given in opposite orders (the migration written two
// ways): MultiLock takes its locks in the order of their names, which the
// two share, and then of their keys. Both must get through; before, the
// first round deadlocked until ctx.
func TestIntegrationBareKeyMultiLockOrder(t *testing.T) {
	t.Parallel()
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	ctx := timeout(t, time.Minute)
	const key = "orders:order"
	c1, c2 := newClient(t, addrsOf(servers), goRedis), newClient(t, addrsOf(servers), goRedis)
	ml1 := redislock.NewMultiLock(c1.NewMutex(key, redlock.WithBareKey()), c1.NewMutex(key))
	ml2 := redislock.NewMultiLock(c2.NewMutex(key), c2.NewMutex(key, redlock.WithBareKey()))
	for round := range 20 {
		start := make(chan struct{})
		errs := make(chan error, 2)
		for _, ml := range []*redislock.MultiLock{ml1, ml2} {
			go func() {
				<-start
				rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				l, err := ml.Lock(rctx)
				if err == nil {
					err = l.Release(ctx)
				}
				errs <- err
			}()
		}
		close(start)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v (the two MultiLocks took the two locks in opposite orders: a deadlock)", round, err)
			}
		}
	}
}
