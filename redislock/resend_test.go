package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redislock/rueidisconn"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// A slow link makes go-redis, left with its default retries as the README
// builds it, time a call out and send it again while the first is still on
// its way: the server then runs it twice. Every state-changing call of
// dlock must come out the same as if it had run once.
const (
	slowRead = 200 * time.Millisecond // the client's ReadTimeout
	slowWay  = 150 * time.Millisecond // the proxy's latency, each way
)

// slowClient returns a Client whose go-redis connection goes through a
// proxy, with go-redis's default retries and a ReadTimeout below the
// round trip once the proxy's latency is on.
func slowClient(t testing.TB, d *deployment) (*redislock.Client, *testenv.Proxy) {
	t.Helper()
	p := testenv.StartProxy(t, d.servers[0].Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: slowRead, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	// Open a few connections, as a busy service's pool has: a resent call
	// then leaves at once on an idle one, rather than after a new
	// connection's handshake.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { rdb.Do(context.Background(), "BLPOP", "dlock-test-nothing", "0.05") })
	}
	wg.Wait()
	c := redislock.New(goredisconn.New(rdb))
	t.Cleanup(func() { c.Close() })
	return c, p
}

// recoverLater takes the proxy's latency off after a second, while a call
// keeps trying.
func recoverLater(t testing.TB, p *testenv.Proxy) {
	timer := time.AfterFunc(time.Second, func() { p.SetLatency(0) })
	t.Cleanup(func() { timer.Stop() })
}

// settle waits until every copy of a call sent over the slow link has
// reached the server, then takes the latency off.
func settle(p *testenv.Proxy) {
	time.Sleep(4 * (slowRead + 2*slowWay))
	p.SetLatency(0)
}

func TestIntegrationResentReentrantReleaseKeepsOuterHold(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, time.Minute)
	c, p := slowClient(t, d)
	name := "resent-reentrant"
	if warm, err := c.NewReentrantMutex("warm-" + name).Lock(ctx); err == nil { // loads the scripts
		warm.Release(ctx)
	}
	outer, err := c.NewReentrantMutex(name, redislock.WithTTL(30*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.NewReentrantMutex(name, redislock.WithTTL(30*time.Second)).Lock(outer.Context())
	if err != nil {
		t.Fatal(err)
	}
	p.SetLatency(slowWay)
	err = inner.Release(ctx)
	settle(p)
	t.Logf("inner Release over the slow link: %v", err)
	other := newClient(t, d, goRedis).NewReentrantMutex(name)
	if l, err := other.TryLock(ctx); err == nil {
		l.Release(ctx)
		t.Fatalf("another owner took the lock while the outer hold is valid (Err %v, %v to Until): the release ran twice",
			outer.Err(), time.Until(outer.Until()))
	} else if !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatal(err)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatalf("outer Release: %v", err)
	}
}

func TestIntegrationResentAddPermitsAddsOnce(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, time.Minute)
	c, p := slowClient(t, d)
	sem := c.NewSemaphore("resent-permits", 2)
	if err := sem.SetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	p.SetLatency(slowWay)
	recoverLater(t, p)
	err := sem.AddPermits(ctx, 1)
	settle(p)
	t.Logf("AddPermits over the slow link: %v", err)
	limit, _ := d.admin(t).Get(ctx, lockKey("resent-permits")+":limit").Result()
	if limit != "3" {
		t.Fatalf("limit after AddPermits(1) on 2 = %s; want 3 (the call ran more than once)", limit)
	}
	if err != nil {
		t.Errorf("AddPermits returned %v; want nil once the link recovered", err)
	}
}

func TestIntegrationResentCountDownCountsOnce(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, time.Minute)
	c, p := slowClient(t, d)
	warm := c.NewLatch("warm-resent-latch") // loads the scripts
	warm.TrySetCount(ctx, 1)
	warm.CountDown(ctx)
	latch := c.NewLatch("resent-latch")
	if ok, err := latch.TrySetCount(ctx, 3); !ok || err != nil {
		t.Fatalf("TrySetCount = %v, %v", ok, err)
	}
	p.SetLatency(slowWay)
	recoverLater(t, p)
	err := latch.CountDown(ctx)
	settle(p)
	t.Logf("CountDown over the slow link: %v", err)
	n, err2 := latch.Count(ctx)
	if err2 != nil {
		t.Fatal(err2)
	}
	if n != 2 {
		t.Fatalf("count after one CountDown from 3 = %d; want 2 (the call ran more than once)", n)
	}
	if err != nil {
		t.Errorf("CountDown returned %v; want nil once the link recovered", err)
	}
}

// commandCalls returns how many times the server has run cmd, those run
// inside scripts included, from INFO commandstats.
func commandCalls(t testing.TB, d *deployment, cmd string) int {
	t.Helper()
	info, err := d.admin(t).Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	return statCalls(info, cmd)
}

// statCalls reads calls=N from the cmdstat_<cmd> line of INFO commandstats.
func statCalls(info, cmd string) int {
	key := "cmdstat_" + cmd + ":calls="
	for i := 0; i+len(key) <= len(info); i++ {
		if info[i:i+len(key)] != key {
			continue
		}
		j := i + len(key)
		k := j
		for k < len(info) && info[k] >= '0' && info[k] <= '9' {
			k++
		}
		n, _ := strconv.Atoi(info[j:k])
		return n
	}
	return 0
}

// The go-redis adapter never lets go-redis send a script again: a call
// whose reply is late runs once on the server, and the caller hears of
// the timeout.
func TestIntegrationGoRedisDoesNotResendScripts(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, time.Minute)
	c, p := slowClient(t, d)
	m := c.NewMutex("resent-mutex", redislock.WithTTL(time.Minute))
	if l, err := m.TryLock(ctx); err == nil { // loads the script, warms the pool
		l.Release(ctx)
	} else {
		t.Fatal(err)
	}
	// The acquire script runs TIME once per run that takes the lock (SET
	// runs two or three times: the lock, the fence counter, and the counter
	// again when it was not behind the clock); the clean-up of what a
	// timed-out attempt may have taken runs none.
	before := commandCalls(t, d, "time")
	p.SetLatency(slowWay)
	_, err := m.TryLock(ctx)
	settle(p)
	runs := commandCalls(t, d, "time") - before
	t.Logf("TryLock over the slow link: %v", err)
	if err == nil {
		t.Error("TryLock succeeded though its reply came after the read timeout")
	}
	if runs != 1 {
		t.Errorf("the acquire script ran %d times; want once", runs)
	}
}

// rueidis re-sends only read-only commands: a script call whose reply is
// late runs once.
func TestIntegrationRueidisDoesNotResendScripts(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, time.Minute)
	p := testenv.StartProxy(t, d.servers[0].Addr())
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{p.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	c := redislock.New(rueidisconn.New(rc))
	t.Cleanup(func() { c.Close() })
	if l, err := c.NewMutex("resent-rueidis-warm").TryLock(ctx); err == nil { // loads the script
		l.Release(ctx)
	} else {
		t.Fatal(err)
	}
	// Only the reply is late: the request reaches the server as soon as
	// rueidis writes it. TryLock gives up after AttemptTimeout (1s), and
	// a request that rueidis has not written by then is not sent at all:
	// on a machine busy enough, an attempt may send nothing (a fresh
	// clone beside other tests did in 1 of 15 runs, when both ways were
	// delayed). Such an attempt shows nothing either way, so the test
	// makes another, with a new name; every attempt whose request went
	// out must have run exactly once.
	const replyLate = 3 * time.Second
	for attempt := 1; ; attempt++ {
		m := c.NewMutex(fmt.Sprintf("resent-rueidis-%d", attempt), redislock.WithTTL(time.Minute))
		before := commandCalls(t, d, "time") // once per run, as above
		p.SetReplyLatency(replyLate)
		start := time.Now()
		_, err := m.TryLock(ctx)
		took := time.Since(start)
		if err == nil {
			t.Fatal("TryLock succeeded though its reply came after AttemptTimeout")
		}
		// A copy sent again would go out on a new connection as soon as
		// the call failed, with no delay on the way in.
		time.Sleep(time.Second)
		p.SetReplyLatency(0)
		runs := commandCalls(t, d, "time") - before
		t.Logf("attempt %d: TryLock returned after %v: %v; the acquire script ran %d times", attempt, took.Round(time.Millisecond), err, runs)
		if runs > 1 {
			t.Fatalf("the acquire script ran %d times; want once", runs)
		}
		if runs == 1 {
			return
		}
		if attempt == 5 {
			t.Fatal("in 5 attempts rueidis sent no request within AttemptTimeout")
		}
	}
}

// A call that must take effect once stops sending its request again
// before the server can have forgotten the request: the reply of the
// first copy, which ran, is lost; the link then drops everything for
// longer than the server remembers the request (shortened here to 1.5s,
// the resending to 600ms); once the link is back, no copy runs again: the change
// is made once, and the call reports that it does not know whether it was.
// (Re-sent until ctx ended, a copy ran after the record had expired and
// made the change a second time.) It does not run in parallel: it
// changes settings of the whole package, which every other test's
// clients read.
func TestIntegrationResendStopsBeforeTheRecordExpires(t *testing.T) {
	t.Cleanup(redislock.SetRequestMemory(1500 * time.Millisecond))
	t.Cleanup(redislock.SetResendFor(600 * time.Millisecond))
	d := standalone(t)
	admin := d.admin(t)
	for _, call := range []struct {
		name   string
		before string // the count after the setup
		want   string // after the call, made once
		setup  func(ctx context.Context, c *redislock.Client) error
		run    func(ctx context.Context, c *redislock.Client) error
		key    string
	}{
		{"AddPermits", "2", "3",
			func(ctx context.Context, c *redislock.Client) error {
				return c.NewSemaphore("lost-add", 2).SetPermits(ctx, 2)
			},
			func(ctx context.Context, c *redislock.Client) error {
				return c.NewSemaphore("lost-add", 2).AddPermits(ctx, 1)
			},
			lockKey("lost-add") + ":limit"},
		{"CountDown", "3", "2",
			func(ctx context.Context, c *redislock.Client) error {
				warm := c.NewLatch("warm-lost-count") // loads the script
				warm.TrySetCount(ctx, 1)
				warm.CountDown(ctx)
				_, err := c.NewLatch("lost-count").TrySetCount(ctx, 3)
				return err
			},
			func(ctx context.Context, c *redislock.Client) error { return c.NewLatch("lost-count").CountDown(ctx) },
			lockKey("lost-count") + ":count"},
	} {
		t.Run(call.name, func(t *testing.T) {
			t.Parallel()
			ctx := timeout(t, time.Minute)
			p := testenv.StartProxy(t, d.servers[0].Addr())
			rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 250 * time.Millisecond, DialTimeout: 250 * time.Millisecond})
			t.Cleanup(func() { rdb.Close() })
			c := redislock.New(goredisconn.New(rdb))
			t.Cleanup(func() { c.Close() })
			if err := call.setup(ctx, c); err != nil {
				t.Fatal(err)
			}
			if v, _ := admin.Get(ctx, call.key).Result(); v != call.before {
				t.Fatalf("%s holds %q after the setup; want %s", call.key, v, call.before)
			}
			p.SetLatency(300 * time.Millisecond) // every reply comes after the read timeout
			done := make(chan error, 1)
			start := time.Now()
			var took time.Duration
			go func() {
				err := call.run(ctx, c)
				took = time.Since(start)
				done <- err
			}()
			for { // the first copy runs; its reply is on its way back
				if v, _ := admin.Get(ctx, call.key).Result(); v == call.want {
					break
				}
				if time.Since(start) > 10*time.Second {
					t.Fatalf("%s never reached %s", call.key, call.want)
				}
				time.Sleep(time.Millisecond)
			}
			p.Blackhole(true)           // the reply, and every copy sent from now on, is lost
			time.Sleep(2 * time.Second) // the server forgets the request
			p.Blackhole(false)
			p.SetLatency(0)
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("%s still sending 5s after the link came back", call.name)
			}
			time.Sleep(500 * time.Millisecond) // a copy still on its way runs
			v, _ := admin.Get(ctx, call.key).Result()
			t.Logf("%s returned after %v: %v; %s holds %s", call.name, took.Round(time.Millisecond), err, call.key, v)
			if v != call.want {
				t.Fatalf("%s holds %s after one %s from %s; want %s: a copy ran after the server forgot the request", call.key, v, call.name, call.before, call.want)
			}
			if !errors.Is(err, redislock.ErrOutcomeUnknown) {
				t.Errorf("%s returned %v; want an error matching ErrOutcomeUnknown", call.name, err)
			}
		})
	}
}

// A copy of a call that must take effect once can arrive after a later
// copy was answered: the first copy's request is held up on its
// connection (here, by the proxy, for 3s), the client times it out and
// sends the request again on a new connection, which is answered at
// once. When that answer is that nothing was changed (a CountDown of a
// latch that is not counting, an AddPermits that would take the limit
// below 1), the late copy must change nothing either: the caller has been
// told the outcome. (The script recorded only the changes it made, so the
// late copy counted down the latch set again after the call returned nil,
// 3 -> 2, and lowered the limit raised after the call was refused,
// 5 -> 3.)
func TestIntegrationLateCopyKeepsTheOutcome(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, time.Minute)
	admin := d.admin(t)
	other := newClient(t, d, goRedis)
	for _, call := range []struct {
		name  string
		setup func(ctx context.Context, c *redislock.Client) error
		run   func(ctx context.Context, c *redislock.Client) error
		then  func(ctx context.Context) error // another client's change, after the call returned
		key   string
		want  string // after then: the late copy changed nothing
	}{
		{"CountDown",
			func(ctx context.Context, c *redislock.Client) error {
				warm := c.NewLatch("warm-late-count") // loads the script
				warm.TrySetCount(ctx, 1)
				return warm.CountDown(ctx)
			},
			func(ctx context.Context, c *redislock.Client) error { return c.NewLatch("late-count").CountDown(ctx) },
			func(ctx context.Context) error {
				_, err := other.NewLatch("late-count").TrySetCount(ctx, 3)
				return err
			},
			lockKey("late-count") + ":count", "3"},
		{"AddPermits",
			func(ctx context.Context, c *redislock.Client) error {
				return c.NewSemaphore("late-add", 2).SetPermits(ctx, 2)
			},
			func(ctx context.Context, c *redislock.Client) error {
				err := c.NewSemaphore("late-add", 2).AddPermits(ctx, -2)
				if errors.Is(err, redislock.ErrInvalidPermits) {
					return nil // refused, as it must be: the limit would be 0
				}
				return fmt.Errorf("AddPermits(-2) on 2 = %v; want ErrInvalidPermits", err)
			},
			func(ctx context.Context) error { return other.NewSemaphore("late-add", 2).SetPermits(ctx, 5) },
			lockKey("late-add") + ":limit", "5"},
	} {
		t.Run(call.name, func(t *testing.T) {
			p := testenv.StartProxy(t, d.servers[0].Addr())
			rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: time.Second, DialTimeout: time.Second})
			t.Cleanup(func() { rdb.Close() })
			c := redislock.New(goredisconn.New(rdb))
			t.Cleanup(func() { c.Close() })
			if err := call.setup(ctx, c); err != nil {
				t.Fatal(err)
			}
			// The first copy is read by the proxy at once and held 3s; the
			// second, a read timeout later, goes through at once.
			p.SetLatency(3 * time.Second)
			timer := time.AfterFunc(500*time.Millisecond, func() { p.SetLatency(0) })
			t.Cleanup(func() { timer.Stop() })
			if err := call.run(ctx, c); err != nil {
				t.Fatalf("%s: %v", call.name, err)
			}
			before := commandCalls(t, d, "evalsha")
			if err := call.then(ctx); err != nil {
				t.Fatal(err)
			}
			// Wait for the late copy: the other client's call, then it.
			for deadline := time.Now().Add(10 * time.Second); commandCalls(t, d, "evalsha") < before+2; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the first copy never reached the server")
				}
			}
			if v, _ := admin.Get(ctx, call.key).Result(); v != call.want {
				t.Fatalf("%s holds %s after the late copy ran; want %s: the copy changed it after the call had returned", call.key, v, call.want)
			}
		})
	}
}

// A later copy of a call that must take effect once may be refused by the
// server without running: BUSY (another script runs past
// busy-reply-threshold, here 100ms), LOADING, a Cluster's TRYAGAIN. Such a
// reply says nothing of the first copy, which ran and whose reply was
// lost: the call must not report it as its outcome, as if nothing had
// changed. (It did: AddPermits returned "server replied: BUSY ..." with
// the limit raised 2 -> 3, and a caller that tried again would have raised
// it twice.) The server is busy for a second; the call keeps sending and
// learns the outcome.
func TestIntegrationBusyServerDoesNotHideTheOutcome(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, time.Minute)
	admin := d.admin(t)
	if err := admin.ConfigSet(ctx, "busy-reply-threshold", "100").Err(); err != nil {
		t.Fatal(err)
	}
	p := testenv.StartProxy(t, d.servers[0].Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 250 * time.Millisecond, DialTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	c := redislock.New(goredisconn.New(rdb))
	t.Cleanup(func() { c.Close() })
	sem := c.NewSemaphore("busy-add", 2)
	if err := sem.SetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	limitKey := lockKey("busy-add") + ":limit"
	p.SetLatency(300 * time.Millisecond) // every reply comes after the read timeout
	done := make(chan error, 1)
	go func() { done <- sem.AddPermits(ctx, 1) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) { // the first copy ran
		if v, _ := admin.Get(ctx, limitKey).Result(); v == "3" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first copy never ran")
		}
	}
	busy := redis.NewClient(&redis.Options{Addr: d.servers[0].Addr(), ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { busy.Close() })
	ran := make(chan error, 1)
	go func() {
		ran <- busy.Eval(ctx, `local s = tonumber(redis.call('TIME')[1])
while tonumber(redis.call('TIME')[1]) - s < 2 do end
return 1`, nil).Err()
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := d.servers[0].Do("PING"); err != nil && strings.Contains(err.Error(), "BUSY") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never got busy")
		}
	}
	p.SetLatency(0) // the copies sent from now on are answered BUSY
	err := <-done
	if err := <-ran; err != nil {
		t.Fatalf("the busy script: %v", err)
	}
	v, _ := admin.Get(ctx, limitKey).Result()
	t.Logf("AddPermits(1) on 2, the server busy after the first copy ran: %v; the limit is %s", err, v)
	if v != "3" {
		t.Fatalf("the limit is %s; want 3", v)
	}
	if err != nil && !errors.Is(err, redislock.ErrOutcomeUnknown) {
		t.Errorf("AddPermits = %v; want nil, or an error matching ErrOutcomeUnknown: the change was made", err)
	}
}

// A request that must run once is sent again until the server answers or
// ctx is done, not only for AttemptTimeout, which bounds each copy: over a
// 2s pause, with rueidis (whose calls end with their context's error),
// CountDown and AddPermits returned ErrOutcomeUnknown, "context deadline
// exceeded", after the first copy's second though ctx had 30s left. They
// now take effect once when the server resumes.
func TestIntegrationResendOutlastsAttemptTimeout(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	srv := d.servers[0]
	ctx := timeout(t, 30*time.Second)
	c := newClient(t, d, rueidisClient)
	latch := c.NewLatch("once-pause")
	if ok, err := latch.TrySetCount(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetCount(2) = %v, %v", ok, err)
	}
	sem := c.NewSemaphore("once-pause-sem", 2)
	if err := sem.SetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"CountDown", func() error { return latch.CountDown(ctx) }},
		{"AddPermits", func() error { return sem.AddPermits(ctx, 1) }},
	} {
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		go func() { time.Sleep(2 * time.Second); srv.Resume() }()
		start := time.Now()
		err := call.do()
		t.Logf("measured: %s over a 2s pause: %v after %v", call.name, err, time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Errorf("%s over a 2s pause = %v; want it sent again until the server answers", call.name, err)
		}
		time.Sleep(100 * time.Millisecond) // resumed
	}
	if n, err := latch.Count(ctx); n != 1 || err != nil {
		t.Errorf("the latch counts %d, %v; want 1: counted down once", n, err)
	}
	if v, err := srv.Do("GET", lockKey("once-pause-sem")+":limit"); v != "3" || err != nil {
		t.Errorf("the semaphore's limit is %q, %v; want 3", v, err)
	}
}
