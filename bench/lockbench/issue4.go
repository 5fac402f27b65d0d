package lockbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// S6 parameters.
const (
	S6Clients   = 16
	S6ReadShare = 0.9
	S6Hold      = 100 * time.Microsecond
)

// runS5 is S3 for S5's contenders: the same clients, key pattern, hold
// and analysis.
// Around it, a second pair of snapshots breaks the client-sent commands
// down by name ("cmd_<name>" per acquisition; this pair also sees the
// clients' connection setup and S3's 8 warm-up cycles).
func runS5(c Contender, srv *server, cfg Config, rep int) (Metrics, error) {
	before, err := srv.snapshot()
	if err != nil {
		return nil, err
	}
	m, err := runS3(c, srv, cfg, rep)
	if err != nil {
		return nil, err
	}
	after, err := srv.snapshot()
	if err != nil {
		return nil, err
	}
	internal := map[string]bool{"info": true}
	for _, n := range c.LuaInternal {
		internal[n] = true
	}
	for name, n := range after.calls {
		if d := n - before.calls[name]; !internal[name] && d > 0 {
			m["cmd_"+name] = ratio(float64(d), m["acquisitions"])
		}
	}
	return m, nil
}

// runS6: S6Clients independent clients loop on one name: with probability
// S6ReadShare a read lock, else a write lock, S6Hold busy work, release.
//
// It runs twice: with the hold as busy work (the scenario; a reader needs
// a CPU while it holds), then as time.Sleep (the lock's own concurrency,
// metrics suffixed "_sleep"), each for cfg.Duration.
func runS6(c Contender, srv *server, cfg Config, rep int) (Metrics, error) {
	m, err := runS6Once(c, srv, cfg, rep, false)
	if err != nil {
		return nil, err
	}
	if err := srv.flush(); err != nil {
		return nil, err
	}
	ms, err := runS6Once(c, srv, cfg, rep, true)
	if err != nil {
		return nil, err
	}
	for k, v := range ms {
		m[k+"_sleep"] = v
	}
	return m, nil
}

func runS6Once(c Contender, srv *server, cfg Config, rep int, sleep bool) (Metrics, error) {
	clients, err := openAll(c, srv.addr(), S6Clients)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	key := "s6:" + strconv.Itoa(rep)
	for i, cl := range clients { // connect and load scripts, both sides
		for _, read := range []bool{true, false} {
			rel, err := cl.(rwClient).LockRW(context.Background(), key+":warm:"+strconv.Itoa(i), read)
			if err != nil {
				return nil, err
			}
			if err := release(context.Background(), rel); err != nil {
				return nil, err
			}
		}
	}
	u0, err := srv.use()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration)
	defer cancel()
	end := time.Now().Add(cfg.Duration)
	reads, writes, fails := make([]int, len(clients)), make([]int, len(clients)), make([]int, len(clients))
	holds := make([]time.Duration, len(clients))
	var (
		wg       sync.WaitGroup
		failOnce sync.Once
	)
	for id, cl := range clients {
		wg.Go(func() {
			rc := cl.(rwClient)
			rng := rand.New(rand.NewPCG(uint64(rep), uint64(id)))
			for ctx.Err() == nil && time.Now().Before(end) {
				read := rng.Float64() < S6ReadShare
				rel, err := rc.LockRW(ctx, key, read)
				acquired := time.Now()
				if err != nil {
					if ctx.Err() == nil && time.Now().Before(end) {
						fails[id]++
						failOnce.Do(func() { progress(cfg, "  %s S6: first failed Lock (client %d): %v", c.Name, id, err) })
					}
					continue
				}
				if sleep {
					time.Sleep(S6Hold)
				} else {
					spin(S6Hold)
				}
				held := time.Since(acquired)
				if err := release(context.Background(), rel); err != nil {
					fails[id]++
				}
				if acquired.Before(end) {
					holds[id] += held
					if read {
						reads[id]++
					} else {
						writes[id]++
					}
				}
			}
		})
	}
	wg.Wait()
	sum := func(v []int) float64 {
		t := 0
		for _, x := range v {
			t += x
		}
		return float64(t)
	}
	s := cfg.Duration.Seconds()
	var held time.Duration
	for _, h := range holds {
		held += h
	}
	m := Metrics{"hold": ratio(float64(held), sum(reads)+sum(writes)), "conc": float64(held) / float64(cfg.Duration), "read_s": sum(reads) / s, "write_s": sum(writes) / s, "acq_s": (sum(reads) + sum(writes)) / s,
		"failures": sum(fails)}
	return m, srv.addUse(u0, c.LuaInternal, sum(reads)+sum(writes), m) // per acquisition, read or write
}

// runR2: one owner holds a ReentrantMutex and takes it again with the
// outer lease's Context, over a Conn that counts Eval calls (round trips);
// interleaved with the uncontended TryLock + Release of a plain Mutex on
// fresh keys by a second client, and a go-redis PING, as references.
func runR2(srv *server, cfg Config) (Metrics, error) {
	cc := &countingConn{}
	wrap := func(c redislock.Conn) redislock.Conn { cc.Conn = c; return cc }
	re, err := openDlock(srv.addr(), "goredis", wrap)
	if err != nil {
		return nil, err
	}
	defer re.Close()
	plain, err := openDlock(srv.addr(), "goredis", nil)
	if err != nil {
		return nil, err
	}
	defer plain.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr()})
	defer rdb.Close()

	ctx := context.Background()
	rm := re.c.NewReentrantMutex("r2", re.opts...)
	var (
		outer         dlock.Lease
		outerAt       time.Time
		reenter, try  []time.Duration
		ping          []time.Duration
		rts, rtMax    int64
		extra, wrongs int
	)
	// A fresh outer hold every second, so that no renewal (at TTL/3)
	// lands on the counting Conn during a measured call.
	takeOuter := func() error {
		if outer != nil {
			if err := outer.Release(ctx); err != nil {
				return fmt.Errorf("outer release: %w", err)
			}
		}
		l, err := rm.Lock(ctx)
		outer, outerAt = l, time.Now()
		return err
	}
	if err := takeOuter(); err != nil {
		return nil, err
	}
	defer func() { outer.Release(ctx) }()
	one := func(i int, measure bool) error {
		if time.Since(outerAt) > time.Second {
			if err := takeOuter(); err != nil {
				return err
			}
		}
		before := cc.evals.Load()
		t0 := time.Now()
		inner, err := rm.Lock(outer.Context())
		d := time.Since(t0)
		n := cc.evals.Load() - before
		if err != nil {
			return fmt.Errorf("re-entering: %w", err)
		}
		if inner.Fence() != outer.Fence() {
			wrongs++
		}
		if err := inner.Release(ctx); err != nil {
			return fmt.Errorf("inner release: %w", err)
		}
		if outer.Err() != nil {
			return fmt.Errorf("outer hold lost after an inner release: %w", outer.Err())
		}

		key := "r2:try:" + strconv.Itoa(i)
		t1 := time.Now()
		l, err := plain.c.NewMutex(key, plain.opts...).TryLock(ctx)
		dt := time.Since(t1)
		if err != nil {
			return fmt.Errorf("TryLock: %w", err)
		}
		if err := l.Release(ctx); err != nil {
			return err
		}

		t2 := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return err
		}
		dp := time.Since(t2)
		if measure {
			reenter, try, ping = append(reenter, d), append(try, dt), append(ping, dp)
			rts += n
			rtMax = max(rtMax, n)
			if n != 1 {
				extra++
			}
		}
		return nil
	}
	for i := range 200 { // warm-up: connections, scripts
		if err := one(-1-i, false); err != nil {
			return nil, err
		}
	}
	end := time.Now().Add(cfg.Duration)
	for i := 0; time.Now().Before(end); i++ {
		if err := one(i, true); err != nil {
			return nil, err
		}
	}
	n := float64(len(reenter))
	return Metrics{
		"calls":       n,
		"rt_mean":     float64(rts) / n,
		"rt_max":      float64(rtMax),
		"not_one":     float64(extra),
		"fence_diff":  float64(wrongs),
		"reenter_p50": float64(percentile(reenter, 0.50)),
		"reenter_p99": float64(percentile(reenter, 0.99)),
		"try_p50":     float64(percentile(try, 0.50)),
		"try_p99":     float64(percentile(try, 0.99)),
		"ping_p50":    float64(percentile(ping, 0.50)),
	}, nil
}
