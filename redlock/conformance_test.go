package redlock_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redlock"
)

// kinds are the kinds of lock Redlock offers on one name, for
// dlocktest.RunKinds: a Mutex alone, which an election's leader holds.
// Their clients are made as backend's NewLocker makes its own.
func kinds(addrs []string, open opener) []dlocktest.Kind {
	kind := func(name string, make func(c *redlock.Client, key string, opts []redlock.Option) dlock.Locker) dlocktest.Kind {
		return dlocktest.Kind{Name: name, Lock: dlock.KindMutex, Holders: 1, New: func(t testing.TB, key string, o dlocktest.Options) dlock.Locker {
			opts := []redlock.Option{redlock.WithTTL(o.TTL), redlock.WithMaxHold(o.MaxHold)}
			if o.NoRenewal {
				opts = append(opts, redlock.WithoutRenewal())
			}
			c := newClient(t, addrs, open, redlock.WithNodeTimeout(nodeTimeoutFor(o.TTL)),
				redlock.WithObserver(o.Observer), redlock.WithRestartWindow(o.TTL))
			return make(c, key, opts)
		}}
	}
	return []dlocktest.Kind{
		kind("Mutex", func(c *redlock.Client, key string, opts []redlock.Option) dlock.Locker {
			return c.NewMutex(key, opts...)
		}),
		kind("Election", func(c *redlock.Client, key string, opts []redlock.Option) dlock.Locker {
			return dlocktest.Campaigner(c.NewElection(key, opts...))
		}),
	}
}

func backend(servers []*testenv.Redis, open opener) dlocktest.Backend {
	addrs := addrsOf(servers)
	each := func(t testing.TB, f func(*testenv.Redis) error) {
		for _, s := range servers {
			if err := f(s); err != nil {
				t.Fatalf("%s: %v", s.Addr(), err)
			}
		}
	}
	var clients dlocktest.Closers
	return dlocktest.Backend{
		NewLocker: func(t testing.TB, key string, o dlocktest.Options) dlock.Locker {
			opts := []redlock.Option{redlock.WithTTL(o.TTL), redlock.WithMaxHold(o.MaxHold)}
			if o.NoRenewal {
				opts = append(opts, redlock.WithoutRenewal())
			}
			// The node timeout: see nodeTimeoutFor.
			//
			// The restart window is the locker's TTL: every client of a
			// deployment must use one window, at least its longest TTL,
			// but the suite's TTLs run from 300ms to a minute, and the
			// case that restarts the nodes (FencesIncreaseAcrossRestart,
			// TTL 5s) waits 10s for the restarted nodes to vote again.
			c := newClient(t, addrs, open, redlock.WithNodeTimeout(nodeTimeoutFor(o.TTL)),
				redlock.WithObserver(o.Observer), redlock.WithRestartWindow(o.TTL))
			return clients.Add(c.NewMutex(key, opts...), c.Close)
		},
		Kinds:       kinds(addrs, open),
		CloseClient: clients.Close,
		ErrClosed:   redlock.ErrClosed,
		Sabotage: func(t testing.TB, key string) {
			each(t, func(s *testenv.Redis) error { _, err := s.Do("DEL", lockKey(key)); return err })
		},
		Pause: func(t testing.TB, d time.Duration) {
			each(t, (*testenv.Redis).Pause)
			time.Sleep(d)
			each(t, (*testenv.Redis).Resume)
		},
		RestartEmpty: func(t testing.TB) { each(t, (*testenv.Redis).Restart) },
		Leftovers: func(t testing.TB, key string) []string {
			var left []string
			for _, s := range servers {
				if out, err := s.Do("EXISTS", lockKey(key)); err != nil || out != "0" {
					left = append(left, fmt.Sprintf("lock key on %s (%s %v)", s.Addr(), out, err))
				}
			}
			return left
		},
		Admin: func(t testing.TB) dlock.Admin {
			return newClient(t, addrs, open, redlock.WithNodeTimeout(time.Second))
		},
		Inspect: func(t testing.TB, key string) dlock.Info {
			// Not the default 50ms, at which a loaded machine failed
			// InspectShowsHolder ("reached 1 of 3 nodes"); no case
			// bounds how long Inspect takes.
			return inspect(t, newClient(t, addrs, open, redlock.WithNodeTimeout(time.Second)), key)
		},
		Restart: func(t testing.TB) {
			each(t, func(s *testenv.Redis) error {
				// As a server that persists its data: with a save point,
				// it writes a snapshot as it shuts down, and loads it
				// when it starts again (with its own configuration).
				if _, err := s.Do("CONFIG", "SET", "save", "3600 1"); err != nil {
					return err
				}
				return s.Restart()
			})
		},
		Unreachable: func(t testing.TB, key string, o dlocktest.Options) (dlock.Locker, func(refuse bool)) {
			proxies := make([]*testenv.Proxy, len(addrs))
			via := make([]string, len(addrs))
			for i, a := range addrs {
				proxies[i] = testenv.StartProxy(t, a)
				via[i] = proxies[i].Addr()
			}
			c := newClient(t, via, open, redlock.WithNodeTimeout(nodeTimeoutFor(o.TTL)),
				redlock.WithObserver(o.Observer), redlock.WithRestartWindow(o.TTL))
			opts := []redlock.Option{redlock.WithTTL(o.TTL), redlock.WithMaxHold(o.MaxHold)}
			if o.NoRenewal {
				opts = append(opts, redlock.WithoutRenewal())
			}
			return clients.Add(c.NewMutex(key, opts...), c.Close), func(refuse bool) {
				for _, p := range proxies {
					if refuse {
						p.SetRefuse(true)
						p.Reset()
					} else {
						p.Blackhole(true)
					}
				}
			}
		},
		// An attempt and the write of its fence (see the package doc),
		// each bounded by the node timeout, at the fault cases' TTL.
		TryLockBound: 2 * nodeTimeoutFor(dlocktest.FaultTTL),
	}
}

// nodeTimeout is the node timeout of test clients whose TTLs go down to
// 300ms: see nodeTimeoutFor.
const nodeTimeout = 250 * time.Millisecond

// nodeTimeoutFor returns the node timeout of a conformance client whose
// locks have the given TTL: a third of it, between 250ms and a second. The
// default 50ms is for a quiet network; under the race detector on a
// 2-core CI machine running every package at once, healthy nodes take
// longer, and an attempt that reaches no majority in time is unavailable:
// at 250ms, TryLockRace's sixteen clients (TTL 10s) saw "reached 0 of 3
// nodes". A call that runs out of the node timeout also costs its
// connection (rueidis and go-redis close a connection whose call timed
// out, and the next call dials again), so a timeout too tight for a
// starved process feeds itself: ReleaseDuringRenewal (TTL 1.2s, 32
// clients of 5 nodes) at a fifth (250ms) had its Locks reach 0 of 5
// nodes for a minute and more at a load average of 30 to 40.
// Acquire and renewal are decided by the first majority, so a slow node
// does not shorten validity; 250ms stays below the suite's shortest TTL
// (300ms), and an attempt that takes a third of the TTL still returns a
// grant with two thirds left, well above the third the suite requires
// (GrantNotShort).
func nodeTimeoutFor(ttl time.Duration) time.Duration {
	return min(max(ttl/3, nodeTimeout), time.Second)
}

func TestIntegrationObserver(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	dlocktest.RunObserver(t, backend(servers, transports[0].open))
}

func TestIntegrationKinds(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	dlocktest.RunKinds(t, backend(servers, transports[0].open))
}

// conformanceCase is the environment variable that has a test process run
// one case of TestIntegrationConformance (see there).
const conformanceCase = "DLOCK_REDLOCK_CONFORMANCE_CASE"

// TestIntegrationConformance runs the suite for each number of nodes and
// transport at once, each on servers of its own and in a test process of
// its own: a run mostly waits (6s of CPU in 58s for one alone), and the
// four one after the other took 280 to 300s of the package's 350 to 435s.
// In one process they could not run at once: the suite counts the
// process's goroutines (CancelledWait), and counted the other runs'. A
// process runs one case when conformanceCase names it, with the flags
// that select tests passed on, and reports its output when it fails.
func TestIntegrationConformance(t *testing.T) {
	testenv.SkipIfShort(t, "needs redis-server")
	if os.Getenv(conformanceCase) == "" {
		// Its processes run beside the package's other tests that
		// mostly wait (those marked parallel): together they took
		// about as long as the tests that run one after the other.
		t.Parallel()
	}
	cases := []struct {
		n  int
		tr int // index into transports
	}{{3, 0}, {3, 1}, {1, 0}, {5, 1}}
	only := os.Getenv(conformanceCase)
	var wg sync.WaitGroup
	for _, tc := range cases {
		tr := transports[tc.tr]
		name := fmt.Sprintf("%s/N=%d", tr.name, tc.n)
		switch {
		case only == name:
			t.Run(name, func(t *testing.T) {
				servers := testenv.StartRedisN(t, tc.n, testenv.RedisConfig{})
				age(t, servers)
				b := backend(servers, tr.open)
				b.SplitVotes = true
				dlocktest.Run(t, b)
			})
		case only == "":
			// t.Run from goroutines, not t.Parallel, which -parallel
			// (GOMAXPROCS, 2 in CI) would hold to two at a time.
			wg.Go(func() { t.Run(name, func(t *testing.T) { runConformanceCase(t, name) }) })
		}
	}
	wg.Wait()
}

// runConformanceCase runs case name of TestIntegrationConformance in a
// new process of this test binary, and fails t with its output if it
// fails.
func runConformanceCase(t *testing.T, name string) {
	// This case alone, and of its cases those that the flag selects.
	run := "^TestIntegrationConformance$"
	for _, elem := range strings.Split(name, "/") {
		run += "/^" + regexp.QuoteMeta(elem) + "$"
	}
	if elems := strings.Split(flagValue("test.run", ""), "/"); len(elems) > 3 {
		run += "/" + strings.Join(elems[3:], "/")
	}
	args := []string{"-test.count=1", "-test.v=true", "-test.run=" + run}
	if skip := flagValue("test.skip", ""); skip != "" {
		args = append(args, "-test.skip="+skip)
	}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(d).String())
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), conformanceCase+"="+name)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the process running %s: %v after %v; its output:\n%s", name, err, time.Since(start).Round(time.Millisecond), out)
	}
	if !bytes.Contains(out, []byte("--- PASS: TestIntegrationConformance/"+name+" ")) {
		t.Fatalf("the process running %s passed without running it; its output:\n%s", name, out)
	}
	t.Logf("%s passed in a process of its own in %v", name, time.Since(start).Round(time.Millisecond))
}

// flagValue returns the value of the test binary's flag name, or def when
// it is not set.
func flagValue(name, def string) string {
	if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
		return f.Value.String()
	}
	return def
}

// inspect returns what c.Inspect reports for name, failing t on an error.
func inspect(t testing.TB, c *redlock.Client, name string) dlock.Info {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := c.Inspect(ctx, name)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", name, err)
	}
	return info
}
