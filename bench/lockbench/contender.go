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
	// Open connects a new, independent Client to the server at addr
	// (S1–S3, R1 contenders).
	Open func(addr string) (Client, error)
	// OpenNodes connects a new, independent Redlock Client to the
	// independent masters at addrs (S4 contenders, see RedlockContenders).
	OpenNodes func(addrs []string) (Client, error)
	// OpenPG connects a new, independent Client to the PostgreSQL
	// database at url (P1, P2 contenders, see PGContenders).
	OpenPG func(url string) (Client, error)
	// OpenMySQL connects a new, independent Client to the MySQL database
	// at dsn (M1, M2 contenders, see MContenders).
	OpenMySQL func(dsn string) (Client, error)
	// LuaInternal lists the commands (commandstats names) that the
	// contender's Lua scripts run inside Redis and that it never sends
	// itself; they are subtracted to count client-issued commands.
	LuaInternal []string
	// Config says how the contender was configured, for the notes.
	Config string
}

// Contenders returns every contender, the floor first.
func Contenders() []Contender {
	return []Contender{rawContender(), rawRueidisContender(), dlockGoRedis(), dlockRueidis(), bsmContender(), redsyncContender(), rueidislockContender(), rueidislockSharedContender()}
}

// selectContenders filters Contenders and RedlockContenders by name; an
// empty list selects all. Each list keeps its floor.
func selectContenders(names []string) (single, redlock []Contender, err error) {
	all, rl := Contenders(), RedlockContenders()
	if len(names) == 0 {
		return all, rl, nil
	}
	pick := func(list []Contender) []Contender {
		var out []Contender
		for _, c := range list {
			if slices.Contains(names, c.Name) || c.Floor {
				out = append(out, c)
			}
		}
		return out
	}
	known := func(n string) bool {
		has := func(c Contender) bool { return c.Name == n }
		return slices.ContainsFunc(all, has) || slices.ContainsFunc(rl, has) || slices.ContainsFunc(issue4Contenders(), has)
	}
	for _, n := range names {
		if !known(n) {
			var list []string
			for _, c := range append(append(all, rl...), issue4Contenders()...) {
				if !slices.Contains(list, c.Name) {
					list = append(list, c.Name)
				}
			}
			return nil, nil, fmt.Errorf("unknown contender %q; known: %s", n, strings.Join(list, ", "))
		}
	}
	return pick(all), pick(rl), nil
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
