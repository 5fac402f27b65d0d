// go get github.com/dlock-go/dlock github.com/redis/go-redis/v9
// DLOCK_REDIS=redis://a:6379,redis://b:6379,redis://c:6379 go run .
package main

import (
	"context"
	"errors"
	"log"
	"os"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

func main() {
	ctx := context.Background()
	// Three or five independent masters (not replicas of each other), as dlock run takes them.
	urls := strings.FieldsFunc(os.Getenv("DLOCK_REDIS"), func(r rune) bool { return r == ',' || r == ' ' })
	if len(urls) < 3 {
		log.Fatal("DLOCK_REDIS: give three or five redis:// URLs, separated by commas")
	}
	var nodes []redisconn.Conn
	for _, url := range urls {
		opt, err := redis.ParseURL(url)
		if err != nil {
			log.Fatal(err)
		}
		opt.ContextTimeoutEnabled = true
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		nodes = append(nodes, goredisconn.New(rdb))
	}
	// A process that runs once makes its connections inside its first
	// call, which the node timeout bounds (50ms by default, for clients
	// that stay up): give a cold start room on a busy host.
	locks := redlock.New(nodes, redlock.WithNodeTimeout(250*time.Millisecond))
	defer locks.Close()

	lease, err := locks.NewMutex("nightly-report").TryLock(ctx) // Lock(ctx) waits until ctx ends
	if errors.Is(err, dlock.ErrNotObtained) {
		// Also on a new deployment's first use: see "The restart window" in docs/backends.md.
		log.Printf("nightly-report not obtained: %v", err)
		return
	}
	if err != nil {
		log.Fatal(err) // too few masters answered; the error names each node's failure
	}
	defer lease.Release(context.Background())

	// Work under the lock, as in the quick start: stop when lease.Context() ends.
	if err := generateReport(lease.Context(), lease.Fence()); err != nil {
		log.Print(err)
	}
}

// generateReport stands for the work; fence goes with every write it makes.
func generateReport(ctx context.Context, fence uint64) error {
	log.Printf("generating the report with fence %d", fence)
	return ctx.Err()
}
