package lockbench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// LockTTL is the lease time used by every contender whose TTL the caller
// chooses (raw floor, dlock, bsm/redislock). redsync and rueidislock keep
// their documented defaults (8s and 5s); no scenario holds a lock that long.
const LockTTL = 10 * time.Second

// A Release ends one holding.
type Release func(ctx context.Context) error

// A Client is one independent lock client: its own Redis connection pool
// and its own lock client.
type Client interface {
	// Lock takes key, blocking with the contender's own wait facility
	// while another client holds it. Uncontended, it is one attempt.
	Lock(ctx context.Context, key string) (Release, error)
	Close() error
}

// A Contender is one lock implementation under test.
type Contender struct {
	Name string
	// Floor marks the raw go-redis baseline that ratios are taken to.
	Floor bool
	// DlockTransport is "goredis" or "rueidis" for dlock contenders.
	DlockTransport string
	// Open connects a new, independent Client to the server at addr.
	Open func(addr string) (Client, error)
	// LuaInternal lists the commands (commandstats names) that the
	// contender's Lua scripts run inside Redis and that it never sends
	// itself; they are subtracted to count client-issued commands.
	LuaInternal []string
	// Config says how the contender was configured, for the notes.
	Config string
}

// Contenders returns every contender, the floor first.
func Contenders() []Contender {
	return []Contender{rawContender(), dlockGoRedis(), dlockRueidis(), bsmContender(), redsyncContender(), rueidislockContender()}
}

// selectContenders filters Contenders by name; an empty list selects all.
func selectContenders(names []string) ([]Contender, error) {
	all := Contenders()
	if len(names) == 0 {
		return all, nil
	}
	var out []Contender
	for _, c := range all {
		if slices.Contains(names, c.Name) || c.Floor {
			out = append(out, c)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(all, func(c Contender) bool { return c.Name == n }) {
			var known []string
			for _, c := range all {
				known = append(known, c.Name)
			}
			return nil, fmt.Errorf("unknown contender %q; known: %s", n, strings.Join(known, ", "))
		}
	}
	return out, nil
}

// openAll opens n independent clients, closing them all on failure.
func openAll(c Contender, addr string, n int) ([]Client, error) {
	clients := make([]Client, 0, n)
	for range n {
		cl, err := c.Open(addr)
		if err != nil {
			closeAll(clients)
			return nil, fmt.Errorf("%s: open: %w", c.Name, err)
		}
		clients = append(clients, cl)
	}
	return clients, nil
}

func closeAll(clients []Client) {
	for _, cl := range clients {
		cl.Close()
	}
}
