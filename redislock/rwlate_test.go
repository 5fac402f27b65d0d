package redislock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// announcesIntent reports whether c is the call of a waiting writer, one
// that announces an intent.
func announcesIntent(c redisconn.Call) bool {
	return c.Script.Name == "rw_write_acquire" && len(c.Args) > 3 && c.Args[2] != "0"
}

// A waiting writer's call whose reply was lost, followed by calls that
// were answered, reaches the server after the writer's Lock has returned
// (its context ended while a reader held, or its Client closed; or a
// later attempt took the lock): the intent it announces again is
// withdrawn, rather than keep new readers out until it expires
// (min(TTL, 2s)); during Close, the call lands within Close's second. The
// test reads the intent
// on the server and sees it go before its expiry, in server time. Before,
// the Lock withdrew its intent once, when it gave up, and not at all when
// granted: the intent stayed until it expired.
func TestIntegrationRWIntentLandingLate(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	for _, how := range []string{"cancelled", "closed", "after-own-grant"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := timeout(t, time.Minute)
			name := "rw-intent-late-" + how
			var armed, held atomic.Bool
			var passed atomic.Int32
			var intent atomic.Value
			var landed sync.WaitGroup
			land := make(chan struct{})
			landOnce := sync.OnceFunc(func() { close(land) })
			t.Cleanup(landOnce)
			wc := redislock.New(heldBackConn{Conn: goRedis(t, d), armed: &armed, held: &held, passed: &passed, land: land, landed: &landed,
				match: announcesIntent, onHold: func(c redisconn.Call) { intent.Store(c.Args[3]) }})
			t.Cleanup(func() { wc.Close() })
			other := newClient(t, d, goRedis)
			opts := []redislock.Option{redislock.WithTTL(30 * time.Second)}
			// The intent lives min(TTL, 2s): the TTL, 30s, keeps a
			// reader's share or the writer's hold for the whole test.
			if how != "after-own-grant" {
				reader, err := other.NewRWMutex(name, opts...).Reader().Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer reader.Release(ctx)
			}
			armed.Store(true)
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			type result struct {
				l   dlock.Lease
				err error
			}
			done := make(chan result, 1)
			go func() {
				l, err := wc.NewRWMutex(name, opts...).Writer().Lock(wctx)
				done <- result{l, err}
			}()
			var r result
			switch how {
			case "cancelled":
				for passed.Load() == 0 { // a later call, answered, renewed the intent
					time.Sleep(time.Millisecond)
				}
				cancel()
				if r = <-done; !errors.Is(r.err, dlock.ErrNotObtained) {
					t.Fatalf("the writer's Lock = %v; want ErrNotObtained", r.err)
				}
			case "closed":
				// The late call lands within Close's second (closeWait).
				for passed.Load() == 0 {
					time.Sleep(time.Millisecond)
				}
				timer := time.AfterFunc(150*time.Millisecond, landOnce)
				defer timer.Stop()
				if err := wc.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				if r = <-done; !errors.Is(r.err, dlock.ErrNotObtained) {
					t.Fatalf("the writer's Lock = %v; want ErrNotObtained", r.err)
				}
			default:
				if r = <-done; r.err != nil {
					t.Fatalf("the writer's Lock = %v", r.err)
				}
				defer r.l.Release(ctx)
			}
			landOnce()
			landed.Wait()
			admin := d.admin(t)
			key := lockKey(name) + ":wintent"
			id := intent.Load().(string)
			expiry := -1.0 // the intent's expiry, server ms, once seen
			for {
				now, err := admin.Time(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				ms := float64(now.UnixMilli())
				score, err := admin.ZScore(ctx, key, id).Result()
				if errors.Is(err, redis.Nil) {
					switch {
					case expiry < 0:
						t.Log("measured: the intent was gone at the first look after the late call landed")
					case ms >= expiry:
						t.Fatalf("the intent the late call announced stayed until it expired (gone %.0fms after its expiry)", ms-expiry)
					default:
						t.Logf("measured: the intent went %.0fms before its expiry", expiry-ms)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				expiry = score
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// The same through the fault proxy, with go-redis as the README builds it:
// the writer's first call is delayed 1.5s on the way, past its
// AttemptTimeout (1s), and reaches the server after a later attempt,
// undelayed, has granted the lock; the intent the late call announces is
// withdrawn before it expires. Before, it stayed its full 2s.
func TestIntegrationRWIntentLandingLateThroughProxy(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, time.Minute)
	p := testenv.StartProxy(t, d.servers[0].Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	wc := redislock.New(goredisconn.New(rdb))
	t.Cleanup(func() { wc.Close() })
	name := "rw-intent-late-proxy"
	opts := []redislock.Option{redislock.WithTTL(30 * time.Second)}
	// Load the scripts: a call answered NOSCRIPT late would not run.
	if l, err := wc.NewRWMutex("warm-"+name, opts...).Writer().Lock(ctx); err != nil {
		t.Fatal(err)
	} else {
		l.Release(ctx)
	}
	before := p.Requests()
	p.SetLatency(1500 * time.Millisecond)
	done := make(chan error, 1)
	var l dlock.Lease
	go func() {
		var err error
		l, err = wc.NewRWMutex(name, opts...).Writer().Lock(ctx)
		done <- err
	}()
	for p.Requests() == before { // the first call is on its way, delayed
		time.Sleep(time.Millisecond)
	}
	p.SetLatency(0)
	if err := <-done; err != nil {
		t.Fatalf("the writer's Lock = %v", err)
	}
	defer l.Release(ctx)
	admin := d.admin(t)
	key := lockKey(name) + ":wintent"
	expiry := -1.0 // the intent's expiry, server ms, once seen
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(10 * time.Millisecond) {
		now, err := admin.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		ms := float64(now.UnixMilli())
		intents, err := admin.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(intents) > 0:
			expiry = intents[0].Score
		case expiry < 0: // not landed yet, or withdrawn before a look saw it
		case ms >= expiry:
			t.Fatalf("the intent the late call announced stayed until it expired (gone %.0fms after its expiry)", ms-expiry)
		default:
			t.Logf("measured: the intent went %.0fms before its expiry", expiry-ms)
			return
		}
	}
	if expiry >= 0 {
		t.Fatal("the intent the late call announced was still there 5s later")
	}
	t.Log("measured: no intent seen in 5s (withdrawn before a look saw it)")
}
