package interop

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	dredislock "github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
)

// Expiry across libraries: a dlock lease that ran out (no renewal) ends by
// its Until, bsm/redislock then takes the key, and dlock's late Release
// leaves bsm's key alone; a dlock lease whose key another library took
// behind its back (an operator's DEL) ends at the watchdog's next renewal;
// a bsm holder that stops refreshing is taken over by a waiting dlock Lock
// once its key expires.
func TestIntegrationBSMRedislockExpiry(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	rdb := newRDB(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dredislock.New(goredisconn.New(newRDB(t, srv.Addr())))
	defer c.Close()
	bsm := redislock.New(rdb)
	const key = "expiry:bsm"
	const short = 300 * time.Millisecond

	// A fixed dlock lease runs out; bsm takes the key; dlock's Release
	// must not delete it.
	l, err := c.NewMutex(key, dredislock.WithBareKey(), dredislock.WithTTL(short), dredislock.WithoutRenewal()).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(short + time.Second):
		t.Fatal("the fixed lease's Done did not close after its TTL")
	}
	if !errors.Is(l.Err(), dlock.ErrExpired) {
		t.Fatalf("the fixed lease ended with %v; want ErrExpired", l.Err())
	}
	var other *redislock.Lock
	for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		// Until is earlier than the key's expiry by the drift allowance.
		if other, err = bsm.Obtain(ctx, key, ttl, nil); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bsm/redislock could not take the key after dlock's lease expired: %v", err)
		}
	}
	l.Release(ctx)
	if v, _ := rdb.Get(ctx, key).Result(); v != other.Token() {
		t.Fatalf("after dlock's late Release the key holds %q; want bsm's token %q", v, other.Token())
	}
	if err := other.Release(ctx); err != nil {
		t.Fatalf("bsm's Release after dlock's late one: %v", err)
	}

	// A renewed dlock lease whose key is deleted and taken by bsm ends at
	// the next renewal (TTL/3), with ErrLost.
	l, err = c.NewMutex(key, dredislock.WithBareKey(), dredislock.WithTTL(ttl)).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, key)
	taken := time.Now()
	if other, err = bsm.Obtain(ctx, key, ttl, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
		t.Logf("the dlock lease ended %v after bsm took its key: %v", time.Since(taken).Round(time.Millisecond), l.Err())
	case <-time.After(ttl):
		t.Fatal("the dlock lease did not end after bsm took its key")
	}
	if !errors.Is(l.Err(), dlock.ErrLost) {
		t.Fatalf("the lease ended with %v; want ErrLost", l.Err())
	}
	if v, _ := rdb.Get(ctx, key).Result(); v != other.Token() {
		t.Fatalf("the key holds %q; want bsm's token (the watchdog must not renew another's key)", v)
	}
	other.Release(ctx)

	// A bsm holder that never refreshes: a waiting dlock Lock takes the
	// key once it expires, not before.
	if other, err = bsm.Obtain(ctx, key, short, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l, err = c.NewMutex(key, dredislock.WithBareKey()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waited := time.Since(start)
	t.Logf("dlock's Lock took the expired bsm key after %v (bsm TTL %v)", waited.Round(time.Millisecond), short)
	if waited < short-100*time.Millisecond { // the key was set just before start
		t.Errorf("dlock's Lock took bsm's key after %v, before its TTL %v ran out", waited, short)
	}
	if waited > short+time.Second {
		t.Errorf("dlock's Lock waited %v for a key with %v left", waited, short)
	}
	if err := other.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
		t.Errorf("bsm's late Release: %v; want ErrLockNotHeld (the key is dlock's now)", err)
	}
	if v, _ := rdb.Get(ctx, key).Result(); v != l.Token() {
		t.Fatalf("the key holds %q; want dlock's token", v)
	}
	l.Release(ctx)
}
