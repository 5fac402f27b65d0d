package redislock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// One process campaigns and leads; another follows the leadership.
func ExampleClient_NewElection() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks := redislock.New(goredisconn.New(rdb))
	defer locks.Close()
	ctx := context.Background()

	// A follower (in real life another process) watches the leadership.
	octx, stop := context.WithCancel(ctx)
	defer stop()
	changes := locks.NewElection("scheduler").Observe(octx)

	election := locks.NewElection("scheduler")
	leadership, err := election.Campaign(ctx, "10.0.0.7:8080") // blocks until this process leads
	if err != nil {
		fmt.Println("campaign:", err)
		return
	}
	leader := <-changes
	fmt.Println("leader:", leader.Value, "- its term is its lease's fence:", leader.Term == leadership.Fence())

	// Lead until leadership.Done() closes (lost) or resign to hand over.
	election.Resign(ctx)
	_, err = election.Leader(ctx)
	fmt.Println(errors.Is(err, dlock.ErrNoLeader))
	// Output:
	// leader: 10.0.0.7:8080 - its term is its lease's fence: true
	// true
}
