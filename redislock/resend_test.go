package redislock_test

import (
	"context"
	"errors"
	"strconv"
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
	m := c.NewMutex("resent-rueidis", redislock.WithTTL(time.Minute))
	if l, err := m.TryLock(ctx); err == nil { // loads the script
		l.Release(ctx)
	} else {
		t.Fatal(err)
	}
	before := commandCalls(t, d, "time") // once per run, as above
	// A deadline long enough for rueidis to write the request on a busy
	// machine (a request whose context is done before it is written is
	// not sent at all), and shorter than the round trip.
	const way, deadline = 1200 * time.Millisecond, time.Second
	p.SetLatency(way)
	_, err = m.TryLock(timeout(t, deadline))
	if err == nil {
		t.Error("TryLock succeeded though its reply came after its deadline")
	}
	for end := time.Now().Add(10 * time.Second); commandCalls(t, d, "time") == before && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(4 * way) // time for a copy sent again to arrive
	p.SetLatency(0)
	if runs := commandCalls(t, d, "time") - before; runs != 1 {
		t.Errorf("the acquire script ran %d times; want once", runs)
	}
}
