package redislock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/redislock"
)

// Eight waiters on their own clients are all released by the third of
// three CountDowns from another client.
func TestIntegrationLatchReleasesWaiters(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx := timeout(t, 20*time.Second)
			name := "latch-" + tr.name
			ctl := newClient(t, d, tr.open).NewLatch(name)
			if ok, err := ctl.TrySetCount(ctx, 3); !ok || err != nil {
				t.Fatalf("TrySetCount(3) = %v, %v; want true", ok, err)
			}
			if ok, err := ctl.TrySetCount(ctx, 5); ok || err != nil {
				t.Fatalf("TrySetCount on a counting latch = %v, %v; want false", ok, err)
			}
			const waiters = 8
			done := make(chan time.Time, waiters)
			var wg sync.WaitGroup
			for range waiters {
				l := newClient(t, d, tr.open).NewLatch(name)
				wg.Go(func() {
					if err := l.Wait(ctx); err != nil {
						t.Error(err)
					}
					done <- time.Now()
				})
			}
			time.Sleep(300 * time.Millisecond) // let them subscribe and back off
			for want := 3; want > 0; want-- {
				if n, err := ctl.Count(ctx); err != nil || n != want {
					t.Fatalf("Count = %d, %v; want %d", n, err, want)
				}
				select {
				case <-done:
					t.Fatalf("a waiter returned with the count at %d", want)
				default:
				}
				if err := ctl.CountDown(ctx); err != nil {
					t.Fatal(err)
				}
			}
			zero := time.Now()
			wg.Wait()
			close(done)
			for at := range done {
				if late := at.Sub(zero); late > 250*time.Millisecond {
					t.Errorf("a waiter returned %v after the count reached zero; want promptly", late)
				}
			}
			if n, err := ctl.Count(ctx); err != nil || n != 0 {
				t.Errorf("Count at zero = %d, %v", n, err)
			}
			if out, _ := d.servers[0].Do("EXISTS", lockKey(name)+":count"); out != "0" {
				t.Error("the latch key remained at zero")
			}
			// Counting down at zero does nothing; the latch can be set again.
			if err := ctl.CountDown(ctx); err != nil {
				t.Errorf("CountDown at zero: %v", err)
			}
			if n, _ := ctl.Count(ctx); n != 0 {
				t.Errorf("Count after counting down at zero = %d", n)
			}
			if ok, err := ctl.TrySetCount(ctx, 1); !ok || err != nil {
				t.Errorf("TrySetCount after zero = %v, %v; want true", ok, err)
			}
			ctl.CountDown(ctx)
		})
	}
}

func TestIntegrationLatchWaitAndCancel(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	l := newClient(t, d, goRedis).NewLatch("latch-wait")
	start := time.Now()
	if err := l.Wait(ctx); err != nil {
		t.Fatalf("Wait on an unset latch: %v", err)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("Wait on an unset latch took %v", took)
	}
	if _, err := l.TrySetCount(ctx, 2); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	start = time.Now()
	err := l.Wait(short)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait past its deadline = %v; want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 400*time.Millisecond {
		t.Errorf("Wait took %v to notice its deadline", took)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Wait(gone); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a cancelled context = %v; want Canceled", err)
	}
	if n, err := l.Count(ctx); err != nil || n != 2 {
		t.Errorf("Count after cancelled waits = %d, %v; want 2", n, err)
	}
}

// A lost notice costs a bounded poll: a count reset behind the latch's
// back (no PUBLISH) is still seen.
func TestIntegrationLatchFallbackPoll(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	l := newClient(t, d, goRedis).NewLatch("latch-poll")
	if _, err := l.TrySetCount(ctx, 1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx) }()
	time.Sleep(200 * time.Millisecond)
	d.servers[0].Do("DEL", lockKey("latch-poll")+":count")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Wait did not see a zero that came without a notice")
	}
}

func TestIntegrationLatchBadInput(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	srv := d.servers[0]
	ctx := timeout(t, 10*time.Second)
	c := newClient(t, d, goRedis)
	for _, n := range []int{0, -1} {
		if ok, err := c.NewLatch("latch-bad").TrySetCount(ctx, n); ok || !errors.Is(err, redislock.ErrInvalidCount) {
			t.Errorf("TrySetCount(%d) = %v, %v; want ErrInvalidCount", n, ok, err)
		}
	}
	if err := c.NewLatch("").CountDown(ctx); err == nil || !strings.Contains(err.Error(), "empty lock name") {
		t.Errorf("CountDown on an unnamed latch = %v", err)
	}

	srv.Do("HSET", lockKey("latch-hash")+":count", "f", "v")
	srv.Do("SET", lockKey("latch-neg")+":count", "-3")
	srv.Do("SET", lockKey("latch-nan")+":count", "many")
	for name, want := range map[string]error{"latch-hash": nil, "latch-neg": redislock.ErrInvalidCount, "latch-nan": redislock.ErrInvalidCount} {
		l := c.NewLatch(name)
		calls := map[string]func() error{
			"Count":       func() error { _, err := l.Count(ctx); return err },
			"CountDown":   func() error { return l.CountDown(ctx) },
			"TrySetCount": func() error { _, err := l.TrySetCount(ctx, 1); return err },
			"Wait":        func() error { return l.Wait(ctx) },
		}
		for op, f := range calls {
			err := f()
			switch {
			case err == nil:
				t.Errorf("%s on %s succeeded", op, name)
			case want == nil && !strings.Contains(err.Error(), "WRONGTYPE"):
				t.Errorf("%s on %s = %v; want a WRONGTYPE error", op, name, err)
			case want != nil && !errors.Is(err, want):
				t.Errorf("%s on %s = %v; want %v", op, name, err, want)
			}
		}
	}
	if out, _ := srv.Do("GET", lockKey("latch-neg")+":count"); out != "-3" {
		t.Errorf("a bad count was changed to %q", out)
	}
}

// CountDown renews the latch's life: a latch counted down slowly is not
// lost while it is still being counted.
func TestIntegrationLatchCountDownRenewsLife(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	l := newClient(t, d, goRedis).NewLatch("latch-life")
	if _, err := l.TrySetCount(ctx, 3); err != nil {
		t.Fatal(err)
	}
	key := lockKey("latch-life") + ":count"
	if err := d.admin(t).PExpire(ctx, key, time.Minute).Err(); err != nil { // as if set 23h59m ago
		t.Fatal(err)
	}
	if err := l.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	if pttl := d.admin(t).PTTL(ctx, key).Val(); pttl < redislock.LatchLife-time.Minute {
		t.Errorf("PTTL after CountDown = %v; want about LatchLife (%v)", pttl, redislock.LatchLife)
	}
}

// Wait waits through a server that cannot answer, as Lock does: a 2s
// pause does not end it (it returned "i/o timeout" during the pause), and
// when its ctx ends while the server still fails, its error matches
// dlock.ErrUnavailable too. Count on a paused server returns within
// AttemptTimeout an error matching dlock.ErrUnavailable, as TryLock's.
func TestIntegrationLatchWaitsThroughAPause(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	srv := d.servers[0]
	ctx := timeout(t, 30*time.Second)
	l := newClient(t, d, goRedis).NewLatch("latch-pause")
	if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetCount(1) = %v, %v; want true", ok, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- l.Wait(ctx) }()
	time.Sleep(200 * time.Millisecond)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := l.Count(context.Background())
	took := time.Since(start)
	if !errors.Is(err, dlock.ErrUnavailable) || took > redislock.AttemptTimeout+dlocktest.Slack {
		t.Errorf("Count on a paused server = %v after %v; want ErrUnavailable within AttemptTimeout", err, took.Round(time.Millisecond))
	}
	cut, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if err := l.Wait(cut); !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait whose ctx ended while the server was paused = %v; want ErrUnavailable and DeadlineExceeded", err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		t.Fatalf("Wait returned during a pause, the latch still counting: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := l.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("Wait after the pause and the last CountDown = %v; want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait not released 5s after the last CountDown")
	}
}
