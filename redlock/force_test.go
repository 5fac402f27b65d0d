package redlock_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redlock"
)

// An operator's ForceUnlock wins over a renewal under way: once it has
// returned (true, nil), no node gets the deposed lease's key back. The
// operator reaches node 0 at once and the others 600ms late, so the
// holder's renewal, made in between, finds its key gone from node 0 and
// still on the two others: a majority extends it, and it takes node 0
// back. (Before the deposed set, the key stayed on node 0 with a full TTL
// after ForceUnlock returned.) Twice: with the key on every node, and with
// node 0 having lost it before (so that only the second round of
// ForceUnlock records the token there). The lease then ends with
// dlock.ErrTakenOver, no key of it is left, and the set of deposed tokens
// expires.
func TestIntegrationForceUnlockWinsOverRetake(t *testing.T) {
	const ttl, lag = 2 * time.Second, 600 * time.Millisecond
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("lost=%v", lost), func(t *testing.T) {
			t.Parallel()
			servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
			age(t, servers)
			ctx := timeout(t, time.Minute)
			name := "forced"
			holder := newClient(t, addrsOf(servers), goRedis)
			l, err := holder.NewMutex(name, redlock.WithTTL(ttl)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for !allHold(servers, name, l.Token()) { // Lock returns on a majority
				time.Sleep(time.Millisecond)
			}
			if lost {
				servers[0].Do("DEL", lockKey(name))
			}
			// The operator's connections wait as long as its node timeout:
			// the lag leaves a 1s read timeout little room on a loaded
			// machine.
			conns := []redisconn.Conn{goRedisTimeout(t, servers[0].Addr(), 10*time.Second)}
			for _, s := range servers[1:] {
				p := testenv.StartProxy(t, s.Addr())
				p.SetLatency(lag / 2)
				conns = append(conns, goRedisTimeout(t, p.Addr(), 10*time.Second))
			}
			operator := redlock.New(conns, redlock.WithNodeTimeout(10*time.Second))
			t.Cleanup(func() { operator.Close() })
			type result struct {
				held bool
				err  error
			}
			forced := make(chan result, 1)
			go func() {
				held, err := operator.ForceUnlock(ctx, name)
				forced <- result{held, err}
			}()
			for v, _ := servers[0].Do("GET", lockKey(name)); v != "" && !lost; v, _ = servers[0].Do("GET", lockKey(name)) {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			refreshed := l.Refresh(ctx) // node 0 absent, the others extend it: node 0 is retaken
			r := <-forced
			t.Logf("Refresh between ForceUnlock's deletes: %v; ForceUnlock: %v, %v", refreshed, r.held, r.err)
			if !r.held || r.err != nil {
				t.Fatalf("ForceUnlock = %v, %v; want true, nil", r.held, r.err)
			}
			for end := time.Now().Add(2 * ttl); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				for i, s := range servers {
					if v, _ := s.Do("GET", lockKey(name)); v != "" {
						pttl, _ := s.Do("PTTL", lockKey(name))
						t.Fatalf("%v after ForceUnlock returned, node %d holds the key again (%q, PTTL %sms); deposed lease's token %q",
							time.Until(end.Add(-2*ttl)).Abs().Round(time.Millisecond), i, v, pttl, l.Token())
					}
				}
			}
			select {
			case <-l.Done():
				if !errors.Is(l.Err(), dlock.ErrTakenOver) {
					t.Errorf("the deposed lease ended with %v; want ErrTakenOver", l.Err())
				}
			default:
				t.Errorf("the deposed lease is still held two TTLs after ForceUnlock")
			}
			for i, s := range servers {
				pttl, _ := s.Do("PTTL", lockKey(name)+":deposed")
				if n := atoi(pttl); n == -1 || n > (2*ttl).Milliseconds() {
					t.Errorf("node %d: the set of deposed tokens has PTTL %sms; want it to expire within %v", i, pttl, 2*ttl)
				}
			}
		})
	}
}

// allHold reports whether every server's lock key holds token.
func allHold(servers []*testenv.Redis, name, token string) bool {
	return strings.Count(strings.Join(values(servers, name), "\n"), token) == len(servers)
}

// Each token that ForceUnlock deposes is kept twice the time its key had
// left, and no longer, however often the name is forced: an operator, or a
// program that breaks stale locks, forcing a name every 300ms must not
// keep every token ever deposed. (The set's expiry was pushed back by each
// ForceUnlock, so the tokens piled up for as long as the forcing went on:
// the first token, whose key had 1s left, was still kept 3s later, with
// every token since.)
func TestIntegrationDeposedTokensExpireOneByOne(t *testing.T) {
	t.Parallel() // mostly waits, on servers of its own: see TestIntegrationConformance
	const ttl, every, rounds = time.Second, 300 * time.Millisecond, 11
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	ctx := timeout(t, time.Minute)
	// Half the TTL: at 250ms a loaded machine (load 39) failed a
	// ForceUnlock ("reached 0 of 3 nodes").
	c := newClient(t, addrsOf(servers), goRedis, redlock.WithNodeTimeout(ttl/2))
	name := "forced-often"
	m := c.NewMutex(name, redlock.WithTTL(ttl))
	var tokens []string
	start := time.Now()
	for i := range rounds {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, l.Token())
		if held, err := c.ForceUnlock(ctx, name); !held || err != nil {
			t.Fatalf("ForceUnlock %d = %v, %v", i, held, err)
		}
		time.Sleep(every)
	}
	// The first tokens' keys had at most a TTL left: their life is over.
	// The set keeps the tokens deposed in the last two TTLs, one more for
	// the jitter of the rounds.
	keep := int(2*ttl/every) + 2
	for i, s := range servers {
		kept := deposed(t, s, name)
		t.Logf("node %d keeps %d of the %d tokens deposed over %v", i, len(kept), rounds, time.Since(start).Round(time.Millisecond))
		if slices.Contains(kept, tokens[0]) || len(kept) > keep {
			t.Errorf("node %d keeps %d deposed tokens, the first one (deposed %v ago, its key had at most %v left) among them: %v; want at most %d",
				i, len(kept), time.Since(start).Round(time.Millisecond), ttl, slices.Contains(kept, tokens[0]), keep)
		}
	}
}

// deposed returns the tokens that node s records as deposed for name.
func deposed(t testing.TB, s *testenv.Redis, name string) []string {
	key := lockKey(name) + ":deposed"
	kind, err := s.Do("TYPE", key)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	switch kind {
	case "none":
		return nil
	case "set":
		out, err = s.Do("SMEMBERS", key)
	default:
		out, err = s.Do("ZRANGE", key, "0", "-1")
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}
