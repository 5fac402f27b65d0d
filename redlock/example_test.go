package redlock_test

import (
	"context"
	"fmt"

	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

func Example() {
	// One go-redis client per independent master, configured as for
	// redislock: ContextTimeoutEnabled, so that a deadline on ctx bounds
	// every call.
	var nodes []redisconn.Conn
	for _, addr := range exampleAddrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, goredisconn.New(rdb))
	}
	locks := redlock.New(nodes)
	defer locks.Close()

	ctx := context.Background()
	lease, err := locks.NewMutex("nightly-report").Lock(ctx)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	defer lease.Release(ctx)

	info, _ := locks.Inspect(ctx, "nightly-report")
	fmt.Println(lease.Key(), "held on a majority:", info.Kind, info.Holders[0].Owner == lease.Token())
	// Output: nightly-report held on a majority: mutex true
}
