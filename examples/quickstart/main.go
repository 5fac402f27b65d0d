// go get github.com/dlock-go/dlock github.com/redis/go-redis/v9
package main

import (
	"context"
	"errors"
	"log"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

func main() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
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
