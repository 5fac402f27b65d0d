// go get github.com/dlock-go/dlock github.com/redis/go-redis/v9
// DLOCK_REDIS=redis://10.0.0.5:6379 go run .   (default: redis://127.0.0.1:6379)
package main

import (
	"cmp"
	"context"
	"errors"
	"log"
	"os"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

func main() {
	ctx := context.Background()
	opt, err := redis.ParseURL(cmp.Or(os.Getenv("DLOCK_REDIS"), "redis://127.0.0.1:6379"))
	if err != nil {
		log.Fatal(err)
	}
	opt.ContextTimeoutEnabled = true // a deadline on ctx bounds every call
	rdb := redis.NewClient(opt)
	locks := redislock.New(goredisconn.New(rdb)) // one per deployment; share it
	defer locks.Close()

	lease, err := locks.NewMutex("nightly-report").TryLock(ctx) // Lock(ctx) waits until ctx ends
	if errors.Is(err, dlock.ErrNotObtained) {
		log.Print("another process holds nightly-report")
		return
	}
	if err != nil {
		log.Fatal(err) // Redis cannot be reached, or refused
	}
	defer lease.Release(context.Background())

	// Work under the lock. The watchdog renews the lease every TTL/3 (TTL: 30s by default).
	// If it is lost anyway (a pause, a partition), lease.Done() closes no later than lease.Until()
	// and lease.Err() says why; lease.Context() is cancelled with the same cause.
	if err := generateReport(lease.Context(), lease.Fence()); err != nil {
		log.Print(err)
	}
}

// generateReport stands for the work; fence goes with every write it makes
// (see package fence), so that a holder that lost the lock cannot overwrite
// a newer holder's work.
func generateReport(ctx context.Context, fence uint64) error {
	log.Printf("generating the report with fence %d", fence)
	return ctx.Err()
}
